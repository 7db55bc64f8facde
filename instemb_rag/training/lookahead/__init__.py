"""The look-ahead recipe: look-ahead distillation from the frozen LLM + multi-view contrastive + retrieval.

objective.py       LookaheadObjective: the records, the frozen LLM's targets, the student, one step
losses.py          the weighted terms of one micro-batch (the loss functions: instemb_rag/losses/)
frozen_llm.py      the frozen copy of the LLM and its cached look-ahead targets
cached_student.py  model.frozen_prefix: the top layers run on cached states of the ones below
negative_memory.py pooled embeddings of earlier outputs, kept as extra retrieval negatives
train_file.py      the run's records file (data.train_file, or built once) and its checks
"""
