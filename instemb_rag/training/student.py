"""The student: its set-up for a run (load, what trains, optimizer) and its forward passes
inside the trainer's losses, behind one small interface.

``load_student`` loads the encoder in float32 (a starting LLM folder's LoRA live through peft),
``make_trainable`` opens the top layers (fully or through LoRA), the final norm and the
look-ahead vectors and names every trainable tensor (``TrainableParts``), ``build_optimizer``
makes AdamW and the warm-up schedule over them.

``compute_losses`` asks a *student runner* for two things:

    forward(pairs)                       one pass over (text, instruction) pairs with the
                                         look-ahead slots: a ``StudentPass``
    input_last_with_dropout(records, p)  the |x| state of each record's input without the
                                         slots, under dropout (SupCon's second view)

``FullStudent`` (here) runs the whole model on token ids, the default. ``CachedStudent``
(cached_student.py) reads the frozen layers' states from the prefix cache and runs only the
trainable top K layers; both return the same tensors up to rounding (tests/training/test_cached_student.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch

from ..datasets.records import TrainingRecord
from ..encoder.llm_folder import is_llm_folder
from ..encoder.modules.lora import apply_lora, plain_parameters
from ..encoder.modules.pooling import anchor_positions, last_valid_positions
from ..errors import InstEmbError
from . import parallel
from .common_args import RunConfig
from .continuation import attach_starting_adapter, check_continuation, starting_llm_folder, starting_point

__all__ = [
    "FullStudent",
    "StudentPass",
    "StudentRunner",
    "TrainableParts",
    "at_last_valid",
    "build_optimizer",
    "decoder_layers",
    "enable_gradient_checkpointing",
    "input_ids_without_slots",
    "load_student",
    "make_trainable",
    "needs_output_pass",
    "refuse_sharded_adapted_tensors",
]


def input_ids_without_slots(encoder, record: TrainingRecord, lookahead_length: int) -> list[int]:
    """Ids of x (template + text + instruction), truncated exactly as the student's input is."""
    ids = encoder.build_ids(record.text, record.instruction, lookahead_length)
    return ids[: len(ids) - lookahead_length]


def needs_output_pass(config) -> bool:
    """Whether a loss reads the student's pass over the answers (the retrieval loss's documents,
    SupCon's student_output view)."""
    t = config.training
    return t.retrieval_weight > 0 or (t.contrastive_weight > 0 and "student_output" in t.views)


@dataclass
class StudentPass:
    """One student forward over (text, instruction) pairs with look-ahead slots, right-padded."""

    hidden: torch.Tensor  # [B, T, d]
    attention_mask: torch.Tensor  # [B, T]
    input_last: torch.Tensor  # [B] position of the last input token
    lookahead_idx: torch.Tensor  # [B, L]

    def at_input_last(self) -> torch.Tensor:
        rows = torch.arange(self.hidden.shape[0], device=self.hidden.device)
        return self.hidden[rows, self.input_last]

    def pooled(self, encoder) -> torch.Tensor:
        """The embedding search compares (the encoder's pooling, DAAP by default)."""
        return encoder.project(encoder.pooling(self.hidden, self.attention_mask, self.lookahead_idx.shape[1]))

    @classmethod
    def from_states(cls, hidden: torch.Tensor, attention_mask: torch.Tensor, lookahead_length: int) -> StudentPass:
        input_last, lookahead_idx = anchor_positions(attention_mask, lookahead_length)
        return cls(hidden, attention_mask, input_last, lookahead_idx)


def at_last_valid(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """[B, d]: each row's state at its last real (unpadded) position."""
    rows = torch.arange(hidden.shape[0], device=hidden.device)
    return hidden[rows, last_valid_positions(attention_mask)]


class StudentRunner(Protocol):
    def forward(self, pairs: Sequence[tuple[str, str | None]]) -> StudentPass: ...

    def input_last_with_dropout(self, records: Sequence[TrainingRecord], dropout: float) -> torch.Tensor: ...


class FullStudent:
    """Every pass runs the whole model from the token ids (no cache)."""

    def __init__(self, encoder):
        self.encoder = encoder
        self.length = encoder.lookahead.length

    def forward(self, pairs: Sequence[tuple[str, str | None]]) -> StudentPass:
        ids = [self.encoder.build_ids(text, instruction, self.length) for text, instruction in pairs]
        states = self.encoder.states(self.encoder.collate(ids, padding_side="right"))
        return StudentPass.from_states(states.hidden, states.attention_mask, self.length)

    def input_last_with_dropout(self, records: Sequence[TrainingRecord], dropout: float) -> torch.Tensor:
        """Dropout on the input embeddings (Llama has no dropout layers); the look-ahead slots are
        left out because a causal model's |x| state cannot see them anyway."""
        x_ids = [input_ids_without_slots(self.encoder, record, self.length) for record in records]
        states = self.encoder.states(self.encoder.collate(x_ids, padding_side="right"), embed_dropout=dropout)
        return at_last_valid(states.hidden, states.attention_mask)


# ---------------------------------------------------------------------------- set-up
def load_student(config: RunConfig, device: torch.device):
    """Float32 master weights (bf16 only inside autocast), on ``device``.

    A starting LLM folder's LoRA adapter is not merged: it runs live through peft from the
    start (the teacher included) and goes on training as an adapter (continuation.py). A
    two-space folder (a two-space default included) trains on from its documents' LLM
    (continuation.starting_point).
    """
    from ..encoder import InstEmbEncoder, load_llm_folder

    model_args = config.model
    reference = starting_point(model_args)
    if reference and is_llm_folder(reference):
        encoder = load_llm_folder(reference, device="cpu", max_length=model_args.max_length, merge_lora=False)
        start = starting_llm_folder(reference)
        top = _trained_layers(len(decoder_layers(encoder.model)), model_args)
        check_continuation(
            start, model_args.lora_rank, model_args.lora_alpha, list(model_args.lora_target_modules), top
        )
        if encoder.lookahead.length != model_args.lookahead_length:
            raise InstEmbError(
                f"{reference} has {encoder.lookahead.length} look-ahead vectors but the config asks for "
                f"model.lookahead_length={model_args.lookahead_length}; make them equal."
            )
        attach_starting_adapter(
            encoder,
            start,
            top,
            model_args.lora_rank,
            model_args.lora_alpha,
            model_args.lora_dropout,
            list(model_args.lora_target_modules),
        )
    else:
        encoder = InstEmbEncoder.from_backbone(
            reference,
            lookahead_length=model_args.lookahead_length,
            pooling=model_args.pooling,
            max_length=model_args.max_length,
            device="cpu",
        )
    return encoder.to(device)


@dataclass
class TrainableParts:
    named: dict[str, torch.nn.Parameter]  # every trainable tensor (for trainer state)
    adapted_names: list[str]  # plain backbone tensors written to adapted.safetensors
    peft_model: object | None  # set when LoRA is on


def decoder_layers(model) -> torch.nn.ModuleList:
    return model.base_model.layers


def _top_layers(layer_count: int, trainable_top_layers: int) -> list[int]:
    return list(range(max(0, layer_count - trainable_top_layers), layer_count))


def _trained_layers(layer_count: int, model_args) -> list[int]:
    """The decoder layers that train: the top ones, or every one for LoRA on all layers."""
    if model_args.lora_all_layers and model_args.lora_rank > 0:
        return list(range(layer_count))
    return _top_layers(layer_count, model_args.trainable_top_layers)


def enable_gradient_checkpointing(encoder) -> None:
    """Recompute decoder layers in backward (non-reentrant, so frozen inputs need no requires_grad)."""
    encoder.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def make_trainable(encoder, config: RunConfig) -> TrainableParts:
    """Freeze the backbone, then open the top layers (fully or through LoRA) and the final norm."""
    model_args = config.model
    model = encoder.model
    for param in model.parameters():
        param.requires_grad_(False)
    layer_count = len(decoder_layers(model))
    top = _trained_layers(layer_count, model_args)
    start = starting_llm_folder(starting_point(model_args))
    peft_model = encoder.adapter  # the starting LLM folder's adapter, attached live by load_student
    if model_args.lora_rank > 0 and top:
        if peft_model is None:
            peft_model = apply_lora(
                model,
                top,
                model_args.lora_rank,
                model_args.lora_alpha,
                model_args.lora_dropout,
                model_args.lora_target_modules,
            )
            encoder.attach_adapter(peft_model)
        for name, param in model.named_parameters():
            if "lora_" in name:
                param.requires_grad_(True)
    elif top:
        for index in top:
            for param in decoder_layers(model)[index].parameters():
                param.requires_grad_(True)
    if model_args.train_final_norm:
        model.base_model.norm.weight.requires_grad_(True)
    # Frozen look-ahead vectors (training on from an LLM folder that has them) mean no input of the
    # frozen lower layers needs a gradient, so backward stops at the first trainable layer.
    encoder.lookahead.vectors.requires_grad_(model_args.train_lookahead)
    named = {f"lookahead.{n}": p for n, p in encoder.lookahead.named_parameters() if p.requires_grad}
    backbone_named = {n: p for n, p in model.named_parameters() if p.requires_grad}
    named.update({f"model.{n}": p for n, p in backbone_named.items()})
    adapted = [n for n in backbone_named if "lora_" not in n]
    # What the starting LLM folder adapted is written again even where this run leaves it alone.
    adapted += [n for n in (start.adapted_names if start else []) if n not in adapted]
    return TrainableParts(named, adapted, peft_model)


def refuse_sharded_adapted_tensors(encoder, parts: TrainableParts) -> None:
    """Rank 0 writes checkpoints alone, so every tensor it writes must be whole on it: a tensor a
    starting LLM folder adapted in a layer this run freezes (and FSDP shards) cannot be."""
    params = plain_parameters(encoder.model)
    missing = [name for name in parts.adapted_names if name not in params]
    if missing:
        raise InstEmbError(f"The starting LLM folder adapted {missing[0]}, which this model lacks.")
    sharded = [name for name in parts.adapted_names if parallel.is_sharded(params[name])]
    if sharded:
        raise InstEmbError(
            f"training.parallel=fsdp shards {sharded[0]}, which the starting LLM folder adapted and "
            "this run freezes; train that layer too (model.trainable_top_layers) or use ddp."
        )


def build_optimizer(encoder, parts: TrainableParts, config: RunConfig):
    from transformers import get_linear_schedule_with_warmup

    t = config.training
    backbone = [p for n, p in parts.named.items() if not n.startswith("lookahead.")]
    groups = []
    if encoder.lookahead.vectors.requires_grad:
        groups.append({"params": [encoder.lookahead.vectors], "lr": t.lookahead_learning_rate, "weight_decay": 0.0})
    if backbone:
        groups.append({"params": backbone, "lr": t.learning_rate, "weight_decay": t.weight_decay})
    optimizer = torch.optim.AdamW(groups)
    scheduler = get_linear_schedule_with_warmup(optimizer, t.warmup_steps, t.max_steps)
    return optimizer, scheduler


def optimizer_with_head(parts, head, training, head_learning_rate: float):
    """AdamW over the student's trainable parameters and a projection head at its own learning
    rate (no weight decay on the head), with a linear warmup and decay: the geometry and
    two-tower recipes' optimizer."""
    from transformers import get_linear_schedule_with_warmup

    backbone = [p for name, p in parts.named.items() if not name.startswith("projection.")]
    groups = [
        {"params": backbone, "lr": training.learning_rate, "weight_decay": training.weight_decay},
        {"params": list(head.parameters()), "lr": head_learning_rate, "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups)
    return optimizer, get_linear_schedule_with_warmup(optimizer, training.warmup_steps, training.max_steps)
