"""InstEmbEncoder: a decoder LLM + look-ahead tokens + pooling, one prefill per input."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn

from . import backbone as backbone_lib
from . import quantize
from .checkpoint import (
    ADAPTED_FILE,
    CONFIG_FILE,
    LORA_DIR,
    EncoderConfig,
    check_complete,
    is_checkpoint,
    read_config,
    write_folder_atomically,
)
from .errors import CheckpointError, FingerprintMismatchError, InstEmbError
from .instructions import Instructions
from .instructions import per_item_instructions as _per_item_instructions
from .models.lookahead import DEFAULT_INIT_TEXT, LookAheadTokens
from .models.pooling import Pooling
from .models.template import LOOKAHEAD_SLOT, PromptTemplate

DEFAULT_LOOKAHEAD = 8
SHIPPED_CHECKPOINT = Path(__file__).parent / "default_checkpoint"


def resolve_device(device: str = "auto") -> torch.device:
    """'auto' means CUDA when present, else CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 on CUDA (tensor cores, half the memory); fp32 on CPU, where bf16 is slower."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


class InstEmbEncoder(nn.Module):
    def __init__(
        self,
        backbone: backbone_lib.Backbone,
        template: PromptTemplate,
        lookahead: LookAheadTokens,
        pooling: str = "daap",
        max_length: int = 512,
        lookahead_length: int | None = None,
        training_info: dict | None = None,
        precision: str = quantize.DEFAULT_PRECISION,
    ):
        super().__init__()
        self.backbone = backbone
        self.model = backbone.model  # registered so .to()/.parameters() cover it
        self.tokenizer = backbone.tokenizer
        self.template = template
        self.lookahead = lookahead
        self.pooling = Pooling(pooling)
        self.max_length = max_length
        # Inference may use fewer look-ahead tokens than were trained (ablation of L).
        self.lookahead_length = lookahead.length if lookahead_length is None else lookahead_length
        if not 0 <= self.lookahead_length <= lookahead.length:
            raise InstEmbError(
                f"lookahead_length={self.lookahead_length} but the checkpoint has {lookahead.length} "
                "look-ahead vectors; choose a value between 0 and that."
            )
        self.training_info = training_info or {}
        self.padding_side = "right"
        self._fingerprint: str | None = None
        # Fixed at construction: an int8 encoder is fingerprinted on its float weights, then quantized.
        self.precision = quantize.check_precision(precision, backbone.model.device)
        if self.precision != quantize.DEFAULT_PRECISION:
            self.fingerprint  # noqa: B018
            quantize.quantize_int8(self)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_backbone(
        cls,
        reference: str | os.PathLike | None = None,
        lookahead_length: int = DEFAULT_LOOKAHEAD,
        pooling: str = "daap",
        max_length: int = 512,
        device: str = "auto",
        init_text: str = DEFAULT_INIT_TEXT,
        precision: str = quantize.DEFAULT_PRECISION,
    ) -> "InstEmbEncoder":
        """An untrained encoder over any decoder: fresh look-ahead vectors, chosen pooling."""
        target = resolve_device(device)
        quantize.check_precision(precision, target)
        loaded = backbone_lib.load_backbone(reference, dtype=default_dtype(target), device=str(target))
        return cls.from_loaded_backbone(loaded, lookahead_length, pooling, max_length, init_text, precision)

    @classmethod
    def from_loaded_backbone(
        cls,
        loaded: backbone_lib.Backbone,
        lookahead_length: int = DEFAULT_LOOKAHEAD,
        pooling: str = "daap",
        max_length: int = 512,
        init_text: str = DEFAULT_INIT_TEXT,
        precision: str = quantize.DEFAULT_PRECISION,
    ) -> "InstEmbEncoder":
        template = PromptTemplate.for_tokenizer(loaded.tokenizer)
        init_ids = loaded.tokenizer(init_text, add_special_tokens=False).input_ids
        lookahead = LookAheadTokens.from_token_embeddings(
            loaded.model.get_input_embeddings(), init_ids, lookahead_length
        )
        encoder = cls(loaded, template, lookahead, pooling, max_length, precision=precision)
        return encoder.to(loaded.model.device)

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike | None = None,
        device: str = "auto",
        pooling: str | None = None,
        lookahead_length: int | None = None,
        max_length: int | None = None,
        precision: str = quantize.DEFAULT_PRECISION,
    ) -> "InstEmbEncoder":
        """Load a checkpoint folder, a Hugging Face model folder, or (None) the default.

        The default is the checkpoint shipped in the package when present, otherwise the
        untrained default backbone with fresh look-ahead tokens. ``precision="int8"`` runs
        the backbone's linear layers in dynamic int8 on the CPU (inference only; see quantize.py).
        """
        if path is None and is_checkpoint(SHIPPED_CHECKPOINT):
            path = SHIPPED_CHECKPOINT
        if path is not None and is_checkpoint(path):
            return cls._from_checkpoint(Path(path), device, pooling, lookahead_length, max_length, precision)
        return cls.from_backbone(
            path,
            lookahead_length=DEFAULT_LOOKAHEAD if lookahead_length is None else lookahead_length,
            pooling=pooling or "daap",
            max_length=max_length or 512,
            device=device,
            precision=precision,
        )

    @classmethod
    def _from_checkpoint(cls, folder: Path, device, pooling, lookahead_length, max_length,
                         precision: str = quantize.DEFAULT_PRECISION) -> "InstEmbEncoder":
        config = read_config(folder)
        check_complete(folder, config)
        target = resolve_device(device)
        quantize.check_precision(precision, target)
        loaded = backbone_lib.load_backbone(config.base_model, dtype=default_dtype(target), device=str(target))
        if loaded.fingerprint != config.base_fingerprint:
            raise FingerprintMismatchError(
                f"Checkpoint {folder} was trained on base model '{config.base_model}' with weights "
                f"fingerprint {config.base_fingerprint}, but the weights found there have fingerprint "
                f"{loaded.fingerprint}. Point the checkpoint at the original base model "
                f"(edit base_model in {folder / CONFIG_FILE}) or retrain it on this one."
            )
        _apply_adapted_weights(loaded.model, folder)
        lookahead = LookAheadTokens.load(folder)
        if lookahead.length != config.lookahead_length:
            raise CheckpointError(
                f"{folder}: config says {config.lookahead_length} look-ahead tokens but "
                f"lookahead.safetensors holds {lookahead.length}. The checkpoint is damaged."
            )
        encoder = cls(
            loaded,
            PromptTemplate(**config.template),
            lookahead,
            pooling or config.pooling,
            max_length or config.max_length,
            lookahead_length,
            config.training,
            precision,
        )
        return encoder.to(loaded.model.device)

    # ------------------------------------------------------------------ identity and saving
    @property
    def dimension(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def device(self) -> torch.device:
        return self.lookahead.vectors.device

    @property
    def config(self) -> EncoderConfig:
        return EncoderConfig(
            base_model=self.backbone.reference,
            base_fingerprint=self.backbone.fingerprint,
            template=self.template.get_config_dict(),
            lookahead_length=self.lookahead.length,
            pooling=self.pooling.mode,
            max_length=self.max_length,
            training=self.training_info,
        )

    def adapted_state_dict(self) -> dict[str, torch.Tensor]:
        """Backbone tensors that training may have changed (those with requires_grad)."""
        return {
            name: param.detach().float().cpu().contiguous()
            for name, param in self.model.named_parameters()
            if param.requires_grad
        }

    def save(self, folder: str | os.PathLike, adapted: dict[str, torch.Tensor] | None = None) -> None:
        """Write a checkpoint folder atomically: config, look-ahead vectors, adapted tensors."""
        quantize.refuse_training(self.precision, "saved as a checkpoint")
        adapted = self.adapted_state_dict() if adapted is None else adapted
        config = self.config

        def fill(staging: Path) -> None:
            (staging / CONFIG_FILE).write_text(json.dumps(config.model_dump(), indent=2))
            self.lookahead.save(staging)
            if adapted:
                save_file(adapted, str(staging / ADAPTED_FILE))

        write_folder_atomically(Path(folder), fill)
        self._fingerprint = None

    @property
    def fingerprint(self) -> str:
        """Identifies everything that shapes an embedding: weights, template, pooling, L."""
        if self._fingerprint is None:
            digest = hashlib.sha256()
            identity = self.config.model_dump(exclude={"training", "files"})
            identity["inference_lookahead_length"] = self.lookahead_length
            identity.update(quantize.fingerprint_fields(self.precision))
            digest.update(json.dumps(identity, sort_keys=True).encode())
            digest.update(self.lookahead.vectors.detach().float().cpu().numpy().tobytes())
            for name, tensor in sorted(self.adapted_state_dict().items()):
                digest.update(name.encode())
                digest.update(tensor.numpy().tobytes())
            self._fingerprint = digest.hexdigest()[:32]
        return self._fingerprint

    def train(self, mode: bool = True) -> "InstEmbEncoder":
        if mode:
            quantize.refuse_training(self.precision, "trained")
        return super().train(mode)

    # ------------------------------------------------------------------ tokenization
    def build_ids(self, text: str, instruction: str | None, lookahead_length: int | None = None) -> list[int]:
        length = self.lookahead_length if lookahead_length is None else lookahead_length
        return self.template.build_ids(self.tokenizer, text, instruction, length, self.max_length)

    def collate(self, id_lists: Sequence[list[int]], padding_side: str | None = None) -> dict[str, torch.Tensor]:
        """Pad id lists into tensors; position ids come from the mask, so padding side is free."""
        side = padding_side or self.padding_side
        width = max(len(ids) for ids in id_lists)
        pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        input_ids = torch.full((len(id_lists), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(id_lists), width), dtype=torch.long)
        for row, ids in enumerate(id_lists):
            span = slice(0, len(ids)) if side == "right" else slice(width - len(ids), width)
            input_ids[row, span] = torch.tensor(ids, dtype=torch.long)
            attention_mask[row, span] = 1
        position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids}

    # ------------------------------------------------------------------ forward
    def input_embeddings(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Token embeddings with look-ahead vectors written into the LOOKAHEAD_SLOT positions."""
        slots = input_ids == LOOKAHEAD_SLOT
        embeds = self.model.get_input_embeddings()(input_ids.clamp(min=0))
        if slots.any():
            per_row = int(slots[0].sum())
            vectors = self.lookahead.vectors[:per_row].to(embeds.dtype)
            embeds = embeds.masked_scatter(
                slots[..., None], vectors.expand(input_ids.shape[0], -1, -1).reshape(-1, embeds.shape[-1])
            )
        return embeds

    def hidden_states(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Final-layer hidden states (after the final norm) for a collated batch."""
        batch = {key: value.to(self.device) for key, value in batch.items()}
        outputs = self.model.base_model(
            inputs_embeds=self.input_embeddings(batch["input_ids"]),
            attention_mask=batch["attention_mask"],
            position_ids=batch["position_ids"],
            use_cache=False,
        )
        return outputs.last_hidden_state

    def forward(self, batch: dict[str, torch.Tensor], lookahead_length: int | None = None) -> torch.Tensor:
        """Un-normalised pooled embeddings [B, d] of a collated batch (differentiable)."""
        length = self.lookahead_length if lookahead_length is None else lookahead_length
        hidden = self.hidden_states(batch)
        return self.pooling(hidden, batch["attention_mask"].to(hidden.device), length)

    # ------------------------------------------------------------------ public encoding API
    @torch.inference_mode()
    def encode(
        self,
        texts: Sequence[str],
        instructions: Instructions = None,
        batch_size: int = 16,
        show_progress: bool = False,
    ) -> np.ndarray:
        """L2-normalised float32 embeddings [N, d], in input order.

        Inputs are sorted by token length so each batch pads as little as possible.
        """
        texts = list(texts)
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise InstEmbError(f"Text #{position} is {type(text).__name__}, not a string.")
        per_item = _per_item_instructions(instructions, len(texts))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        id_lists = [self.build_ids(text, instruction) for text, instruction in zip(texts, per_item)]
        order = sorted(range(len(id_lists)), key=lambda i: -len(id_lists[i]))
        output = np.zeros((len(texts), self.dimension), dtype=np.float32)
        starts = range(0, len(order), batch_size)
        for start in _progress(starts, show_progress, total_items=len(order), batch_size=batch_size):
            chunk = order[start : start + batch_size]
            pooled = self.forward(self.collate([id_lists[i] for i in chunk])).float()
            pooled = torch.nn.functional.normalize(pooled, dim=-1)
            output[chunk] = pooled.cpu().numpy()
        return output

    def encode_queries(self, queries: Sequence[str], instructions: Instructions = None, **kwargs) -> np.ndarray:
        """One instruction per query (or one string for all, or None); one batched call."""
        return self.encode(queries, instructions, **kwargs)

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        """Documents are embedded once, under one optional instruction."""
        return self.encode(documents, instruction, **kwargs)

    def encode_instructions(self, text: str, instructions: Sequence[str | None], batch_size: int = 32) -> np.ndarray:
        """One text under K instructions [K, d]: the text's key/value cache is computed once.

        Equals ``encode_queries([text] * K, instructions)``; see instemb_rag/fast/shared_prefix.py.
        """
        from .fast.shared_prefix import encode_instructions

        return encode_instructions(self, text, instructions, batch_size=batch_size)


def _apply_adapted_weights(model: nn.Module, folder: Path) -> None:
    """Overlay the tensors training changed, then merge a LoRA adapter if the checkpoint has one."""
    adapted_path = folder / ADAPTED_FILE
    if adapted_path.is_file():
        tensors = load_file(str(adapted_path))
        own = dict(model.named_parameters())
        unknown = sorted(set(tensors) - set(own))
        if unknown:
            raise CheckpointError(
                f"{adapted_path} holds tensors the base model lacks ({', '.join(unknown[:3])}...). "
                "It was trained on a different architecture."
            )
        with torch.no_grad():
            for name, tensor in tensors.items():
                if own[name].shape != tensor.shape:
                    raise CheckpointError(f"{adapted_path}: tensor {name} has shape {tuple(tensor.shape)}, "
                                          f"the base model expects {tuple(own[name].shape)}.")
                own[name].copy_(tensor.to(own[name].dtype))
    lora_path = folder / LORA_DIR
    if lora_path.is_dir():
        from .training.lora import merge_lora_adapter

        merge_lora_adapter(model, lora_path)


def _progress(starts, enabled: bool, total_items: int, batch_size: int):
    if not enabled:
        yield from starts
        return
    from .progress import counting_progress

    with counting_progress("embedding") as bar:
        task = bar.add_task("embed", total=total_items)
        for start in starts:
            yield start
            bar.advance(task, min(batch_size, total_items - start))
