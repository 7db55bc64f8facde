"""The reader recipe's arguments (Tevatron style: one dataclass, read from a YAML recipe or flags)."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class ReaderTrainingArguments:
    records: str  # reader records (instemb-rag build-reader-data)
    output_dir: str  # checkpoints (checkpoint-<step>/) and final/
    base: str = "minilm"  # the sentence encoder whose BERT the reader starts from
    lora_rank: int = 32
    lora_top_layers: int = 0  # LoRA in the top N layers only (0: every layer); backward stops below them
    max_length: int = 160  # training window (documents cut, never the query and instruction)
    inference_max_length: int = 256  # the saved reader's window
    records_per_step: int = 8
    candidates_per_record: int = 8  # the positive and up to this many minus one negatives
    learning_rate: float = 3.0e-4  # LoRA
    head_learning_rate: float = 1.0e-3
    weight_decay: float = 0.01
    warmup_steps: int = 30
    max_steps: int = 1000
    max_grad_norm: float = 1.0
    save_steps: int = 50
    validation_share: float = 0.04  # whole groups held out for the run's own validation and the fusion weight
    validation_records: int = 400
    seed: int = 42
    threads: int = 0  # 0: torch's default
    bf16: str = "auto"  # auto: bf16 autocast where the CPU has bf16 instructions (or on a GPU); yes; no
    device: str = "auto"

    @classmethod
    def from_mapping(cls, values: dict, where: str) -> ReaderTrainingArguments:
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"{where}: unknown reader training keys {unknown}; known: {sorted(known)}")
        return cls(**values)
