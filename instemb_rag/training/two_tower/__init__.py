"""The two-tower recipe (issue 44): the query LLM of a two-tower model, InstEmb queries trained into
a sentence encoder's document space, against its cached document vectors (objective.py; the
vectors: ../cached_vectors.py)."""
