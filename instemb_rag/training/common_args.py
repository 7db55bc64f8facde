"""The config sections every recipe reads (``model``, ``data``, ``training``) and ``RunConfig``,
the config as a recipe sees it.

args.py's ``TrainConfig`` composes these with each recipe's own section (effect/args.py's
``EffectArguments``, ...) and loads the whole from YAML/JSON: it imports the recipes' sections, so
it stands above them. The loop's ``Objective``, the student and every recipe are typed by
``RunConfig`` from here instead, so no recipe imports the composer above it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["VIEW_NAMES", "DataArguments", "ModelArguments", "RunConfig", "TrainingArguments"]

VIEW_NAMES = ("student_input", "student_input_dropout", "teacher_input", "student_output")


@dataclass
class ModelArguments:
    model_name_or_path: str | None = None  # None = the default backbone (SmolLM2-135M-Instruct)
    lookahead_length: int = 8
    max_length: int = 192  # training inputs are truncated here
    inference_max_length: int = 512  # written into checkpoints: what the trained encoder truncates at
    pooling: str = "daap"
    # Layers trained (from the top); the rest are frozen. The paper trains the top 8 of 32
    # (25 %); 6 of SmolLM2's 30 (20 %) keeps the same spirit at a similar cost.
    trainable_top_layers: int = 6
    train_final_norm: bool = True
    # False keeps the look-ahead vectors as the starting LLM folder has them; backward then stops
    # at the lowest trainable layer instead of running through the whole model (~2x faster).
    train_lookahead: bool = True
    # LoRA on the trainable top layers instead of training them fully (0 = full training).
    lora_rank: int = 0
    lora_alpha: float = 32.0
    lora_dropout: float = 0.0
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    # LoRA on every decoder layer instead of the top trainable_top_layers (with lora_rank > 0).
    lora_all_layers: bool = False
    # Cache the states entering the lowest trainable layer once per input, so each step runs only
    # the top trainable_top_layers (training/cached_student.py). Needs train_lookahead: false and
    # no lora_all_layers: then nothing below the top layers changes.
    frozen_prefix: bool = False
    frozen_prefix_dtype: str = "float16"  # "float32": cached steps equal full ones to rounding (2x the bytes)


@dataclass
class DataArguments:
    train_file: str | None = None  # JSONL of records; None = build from build_sets below
    data_root: str | None = (
        None  # None = paths.data_root(): $INSTEMB_DATA_ROOT, else ../shared/data beside the checkout
    )
    build_sets: list[str] = field(default_factory=lambda: ["msmarco_qa", "pubmedqa", "condaqa", "scifact_stance"])
    build_dir: str | None = None  # where built records go; None = <output_dir>/data
    heldout_fraction: float = 0.1
    data_seed: int = 0
    max_per_set: int | dict[str, int] | None = None  # a cap for every set, or per set name


@dataclass
class TrainingArguments:
    output_dir: str = "runs/instemb"
    max_steps: int = 100  # optimizer steps
    # Examples per micro-batch, all ranks together (the contrastive loss sees one micro-batch
    # whole: under torchrun each rank runs batch_size / world_size of them and gathers the rest).
    batch_size: int = 8
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-5  # backbone parameters (full layers, norm or LoRA)
    lookahead_learning_rate: float = 1e-3  # the look-ahead vectors are new parameters
    weight_decay: float = 0.0
    warmup_steps: int = 10
    max_grad_norm: float = 1.0
    distill_loss: str = "mse"  # "mse" (eq. 1) or "kl" (eq. 2)
    mse_normalize_by_dim: bool = True
    kl_temperature: float = 1.0
    distill_weight: float = 1.0
    # The teacher reads the first L *content* words of the answer (stopwords removed, paper
    # section 3), so the look-ahead targets carry meaning rather than "The", "of", "is".
    distill_content_words: bool = False
    # Distil only the records built from these sets (records.source_set, e.g. [msmarco_passages]):
    # plain search is held to the teacher while the contrast sets learn a relation the teacher
    # lacks. None = every record.
    distill_sets: list[str] | None = None
    contrastive_weight: float = 1.0
    temperature: float = 0.1
    # Ranking loss on the pooled (DAAP) query and output embeddings, with the hard negatives
    # (negative_instruction, negative_outputs, the group's other records); losses/retrieval.py.
    retrieval_weight: float = 0.0
    retrieval_temperature: float = 0.05
    # Pooled embeddings of the last N outputs, kept as extra negatives for the retrieval loss
    # (negative_memory.py): more negatives without more forward passes; 0 = off.
    negative_memory: int = 0
    views: list[str] = field(default_factory=lambda: list(VIEW_NAMES))
    view_dropout: float = 0.2
    # The frozen LLM's look-ahead targets, cached on disk (lookahead/frozen_llm.py); before issue 45
    # these were teacher_cache and teacher_cache_dir (still read: RENAMED_KEYS).
    llm_target_cache: bool = True  # False = run the frozen LLM every step (benchmarks only)
    llm_target_cache_dir: str | None = None  # None = <output_dir>/teacher_cache
    frozen_prefix_dir: str | None = None  # model.frozen_prefix's cache; None = $INSTEMB_HOME/prefix_cache
    # Micro-batches of records of similar length (less padding); groups still share a batch
    # (training/data_order.py). Changes which records meet in a batch, so off by default.
    bucket_by_length: bool = False
    seed: int = 42
    device: str = "auto"
    bf16: bool = True  # autocast to bfloat16 on CUDA (ignored on CPU)
    # Recompute each decoder layer's activations in backward instead of keeping them (less memory,
    # ~30 % more compute); see `instemb-rag train --dry-run` for the difference.
    gradient_checkpointing: bool = False
    # Under torchrun: "ddp" (replicated weights, gradients summed once a step) or "fsdp" (decoder
    # layers sharded over the ranks, bf16 compute); choices.ParallelMode.
    parallel: str = "ddp"
    logging_steps: int = 1
    save_steps: int = 50
    save_total_limit: int = 2
    save_dtype: str = "float32"  # dtype of adapted.safetensors / LoRA weights in checkpoints
    resume: bool = False
    show_progress: bool = True


class RunConfig(Protocol):
    """A run's config as the loop, the student and a recipe read it: the sections every recipe
    shares, and the recipe's own section by its name (``config.effect``, ``config.geometry``, ...).
    ``args.TrainConfig`` is the one kind there is."""

    model: ModelArguments
    data: DataArguments
    training: TrainingArguments
