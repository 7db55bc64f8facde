"""InstEmbEncoder: a decoder LLM + look-ahead tokens + pooling, one prefill per input."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..errors import InstEmbError
from ..instructions import Instructions
from ..instructions import per_item_instructions as _per_item_instructions
from . import backbone as backbone_lib
from . import llm_folder, quantize
from .composed.spec import llm_folder_of
from .device import default_dtype, resolve_device
from .fast.cuda_graphs import encode_on_cuda
from .llm_folder import NOT_IN_FINGERPRINT, EncoderConfig
from .modules.forward import States, embed_inputs, forward_runs, run_backbone
from .modules.lookahead import DEFAULT_INIT_TEXT, LookAheadTokens
from .modules.pooling import Pooling
from .modules.projection import Projection
from .modules.template import PromptTemplate
from .settings import EncoderSettings
from .weights_origin import remembered_fingerprint

# SHIPPED_CHECKPOINT, shipped_llm_checkpoint: aliases kept for compatibility (issue 68 names round 2)
__all__ = ["DEFAULT_LOOKAHEAD", "SHIPPED_MODEL_FOLDER", "InstEmbEncoder", "shipped_llm_folder"]
__all__ += ["SHIPPED_CHECKPOINT", "shipped_llm_checkpoint"]

DEFAULT_LOOKAHEAD = 8
# The package folder holds the shipped default (package data), one level above this module: a
# model folder: a symmetric LLM folder, or a composed folder whose documents_llm/ is the shipped LLM.
# (Its folder name, default_checkpoint, is historical: package data, the GPU kit and users' paths.)
SHIPPED_MODEL_FOLDER = Path(__file__).parent.parent / "default_checkpoint"
SHIPPED_CHECKPOINT = SHIPPED_MODEL_FOLDER  # alias kept for compatibility (issue 68 names round 2)


def shipped_llm_folder() -> Path:
    """The shipped LLM folder, whichever layout ships: the LLM part of a composed folder
    (``documents_llm/``), else the shipped model folder itself (an LLM folder). What code that means the LLM
    loads (its internals, its document space, a training start); ``load_model(None)`` is the
    shipped default as a whole. (Defined here only; encoder.load and the package face hand it out.)"""
    return llm_folder_of(SHIPPED_MODEL_FOLDER)


shipped_llm_checkpoint = shipped_llm_folder  # alias kept for compatibility (issue 68 names round 2)


class InstEmbEncoder(nn.Module):
    """The symmetric encoder, and the LLM part of every encoder of parts (encoder/composed/): one
    prefill per input, look-ahead tokens, pooling and an optional head; queries and documents
    are embedded alike (a document under an optional instruction)."""

    takes_llm_weight = False  # one space: no query-time knob (protocol.query_knob)
    is_two_tower = False

    def __init__(
        self,
        backbone: backbone_lib.Backbone,
        template: PromptTemplate,
        lookahead: LookAheadTokens,
        settings: EncoderSettings,
        training_info: dict | None = None,
        trained_names: Sequence[str] = (),
        _quantize: bool = True,
        projection: Projection | None = None,
        identities: Sequence[dict] = (),
    ):
        super().__init__()
        self.backbone = backbone
        self.model = backbone.model  # registered so .to()/.parameters() cover it
        self.tokenizer = backbone.tokenizer
        self.template = template
        self.lookahead = lookahead
        # Inference may use fewer look-ahead tokens than were trained (ablation of L).
        if not settings.lookahead_length <= lookahead.length:
            raise InstEmbError(
                f"lookahead_length={settings.lookahead_length} but the LLM folder has {lookahead.length} "
                "look-ahead vectors; choose a value between 0 and that."
            )
        quantize.check_precision(settings.precision, backbone.model.device)
        self._settings = settings
        self._pooling = Pooling(settings.pooling)
        # Optional head into a teacher's space (models/projection.py): the embedding is its output.
        self.projection = projection
        if projection is not None and projection.in_features != int(backbone.model.config.hidden_size):
            raise InstEmbError(
                f"The projection head expects {projection.in_features}-dimensional pooled states, but the "
                f"backbone's hidden size is {backbone.model.config.hidden_size}: it belongs to another base model."
            )
        # Backbone tensors a save writes (llm_folder.save): named, never inferred from requires_grad.
        self.trained_names: tuple[str, ...] = tuple(sorted(trained_names))
        self.training_info = training_info or {}  # provenance only: not part of the fingerprint
        self.padding_side = "right"
        self.__dict__["adapter"] = None  # a live peft LoRA (training); not a submodule: it wraps self.model
        self._fingerprint: str | None = None
        # Fingerprints of this LLM with more identity (a two-tower model's sentence encoder entry),
        # taken on the float weights of an int8 encoder before they are quantized.
        self._identity_fingerprints: dict[str, str] = {}
        # An int8 encoder is fingerprinted on its float weights, with the precision it got
        # (the fp32 fingerprint when no layer could go int8), then quantized.
        if _quantize and settings.precision != quantize.DEFAULT_PRECISION:

            def fingerprint_with(fields: dict) -> str:
                for extra in identities:
                    self._identity_fingerprints[_identity_key(extra)] = self._fingerprint_with(fields, extra)
                return self._fingerprint_with(fields)

            self._fingerprint = quantize.prepare_int8(self, fingerprint_with)

    # ------------------------------------------------------------------ settings (read-only)
    @property
    def settings(self) -> EncoderSettings:
        return self._settings

    @property
    def pooling(self) -> Pooling:
        return self._pooling

    @property
    def lookahead_length(self) -> int:
        """Look-ahead tokens used at inference (``lookahead.length`` were trained)."""
        return self.settings.lookahead_length

    @property
    def max_length(self) -> int:
        return self.settings.max_length

    @property
    def precision(self) -> str:
        return self.settings.precision

    def with_options(
        self, pooling: str | None = None, lookahead_length: int | None = None, max_length: int | None = None
    ) -> InstEmbEncoder:
        """This encoder under other settings, sharing its weights (nothing is copied or loaded).

        It is a different encoder, with its own fingerprint: the one ``from_pretrained`` with
        these settings would give.
        """
        settings = self.settings.with_changes(pooling=pooling, lookahead_length=lookahead_length, max_length=max_length)
        if settings == self.settings:
            return self
        if self.precision != quantize.DEFAULT_PRECISION:
            # Its fingerprint would need the float weights, which quantization replaced.
            raise InstEmbError(
                f"with_options is for fp32 encoders; load the model again with "
                f"precision='{self.precision}' and these settings instead."
            )
        return self._view(settings, self.projection)

    def _view(self, settings: EncoderSettings, projection: Projection | None) -> InstEmbEncoder:
        """An fp32 encoder with these settings and head, sharing this one's weights, adapter and
        padding side (with_options and with_projection)."""
        view = InstEmbEncoder(
            self.backbone,
            self.template,
            self.lookahead,
            settings,
            self.training_info,
            self.trained_names,
            _quantize=False,
            projection=projection,
        )
        view.padding_side = self.padding_side
        view.__dict__["adapter"] = self.adapter
        return view

    def attach_adapter(self, peft_model) -> None:
        """Record the LoRA adapter peft injected into ``self.model`` (a save writes it to lora/)."""
        self.__dict__["adapter"] = peft_model

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
    ) -> InstEmbEncoder:
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
    ) -> InstEmbEncoder:
        template = PromptTemplate.for_tokenizer(loaded.tokenizer)
        init_ids = loaded.tokenizer(init_text, add_special_tokens=False).input_ids
        lookahead = LookAheadTokens.from_token_embeddings(
            loaded.model.get_input_embeddings(), init_ids, lookahead_length
        )
        settings = EncoderSettings(pooling, lookahead_length, max_length, precision)
        encoder = cls(loaded, template, lookahead, settings)
        return encoder.to(loaded.model.device)

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike | None = None, device: str = "auto", **options):
        """Load a model folder of any layout, a Hugging Face model folder, or (None) the default
        (every reference encoder/load.py lists; ``encoder.load.load_model`` is this).

        The default is the model shipped in the package when present (a symmetric LLM folder, or a
        folder of parts: then a TwoSpacesEncoder or an InstructionEffectEncoder;
        ``shipped_llm_folder()`` is its LLM), otherwise the untrained default backbone with fresh
        look-ahead tokens. ``options``: ``pooling``, ``lookahead_length``, ``max_length`` (None: the
        model's own) and ``precision`` ("int8" runs the backbone's linear layers in dynamic int8 on
        the CPU, inference only; see quantize.py).
        """
        # references.py is handed this class rather than importing it: no import cycle.
        from .references import load_reference

        return load_reference(cls, path, SHIPPED_MODEL_FOLDER, device, **options)

    # ------------------------------------------------------------------ identity and saving
    @property
    def hidden_size(self) -> int:
        """Width of the backbone's hidden states (what the LLM-state teacher targets hold)."""
        return int(self.model.config.hidden_size)

    @property
    def dimension(self) -> int:
        """Width of the embeddings: the projection head's output where there is one."""
        return self.projection.dimension if self.projection is not None else self.hidden_size

    def with_projection(self, projection: Projection | None) -> InstEmbEncoder:
        """This encoder with another projection head (or none), sharing the backbone weights.

        A different head is a different encoder (its own fingerprint); training attaches the
        head it fits this way before the first step.
        """
        if self.precision != quantize.DEFAULT_PRECISION:
            raise InstEmbError("with_projection is for fp32 encoders (training); quantized encoders are for inference.")
        return self._view(self.settings, projection)

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
            trained=list(self.trained_names),
            projection=self.projection.get_config_dict() if self.projection is not None else None,
        )

    def save(self, folder: str | os.PathLike, trained: Sequence[str] | None = None) -> None:
        """Write an LLM folder atomically (llm_folder.save): config, look-ahead vectors,
        the trained backbone tensors (``trained``, default ``trained_names``) and a live adapter."""
        llm_folder.save(self, folder, trained=trained)
        self._fingerprint = None

    @property
    def fingerprint(self) -> str:
        """Identifies everything that shapes an embedding: weights, template, pooling, L, precision.

        Every backbone weight is hashed as it is now (not only the trained ones): that is how
        every existing index and embedding cache was fingerprinted, so it stays so.
        """
        if self._fingerprint is None:
            self._fingerprint = self._fingerprint_with(quantize.fingerprint_fields(self.precision))
        return self._fingerprint

    def fingerprint_with_identity(self, extra: dict) -> str:
        """The fingerprint of this LLM with ``extra`` in its identity: a two-tower model's (its
        sentence encoder's entry, composed/routes.py), the recipe those models always had."""
        key = _identity_key(extra)
        if key not in self._identity_fingerprints:
            if self.precision != quantize.DEFAULT_PRECISION:
                raise InstEmbError(
                    "An int8 LLM is fingerprinted on its float weights when it loads: load the model folder "
                    "with precision='int8' (encoder.load.load_model) rather than composing it afterwards."
                )
            self._identity_fingerprints[key] = self._fingerprint_with(
                quantize.fingerprint_fields(self.precision), extra
            )
        return self._identity_fingerprints[key]

    def _fingerprint_with(self, precision_fields: dict, extra: dict | None = None) -> str:
        """The fingerprint of the weights as they are now, with these precision fields (and ``extra``
        identity: fingerprint_with_identity)."""
        identity = self.config.model_dump(exclude=set(NOT_IN_FINGERPRINT))
        if identity.get("projection") is None:
            identity.pop("projection", None)  # fingerprints from before heads existed stay valid
        identity.update(extra or {})
        identity["inference_lookahead_length"] = self.lookahead_length
        identity.update(precision_fields)
        head = [json.dumps(identity, sort_keys=True).encode()]
        head.append(self.lookahead.vectors.detach().float().cpu().numpy().tobytes())
        tail = []
        if self.projection is not None:
            for name, tensor in sorted(self.projection.state_tensors().items()):
                tail += [f"projection.{name}".encode(), tensor.numpy().tobytes()]

        def over_every_weight() -> str:
            digest = hashlib.sha256()
            for part in head:
                digest.update(part)
            for name, param in sorted(self.model.named_parameters(), key=lambda item: item[0]):
                digest.update(name.encode())
                # The array's own buffer (the same bytes as tobytes(), without copying 0.5 GB first).
                digest.update(memoryview(param.detach().float().cpu().contiguous().numpy()))
            for part in tail:
                digest.update(part)
            return digest.hexdigest()[:32]

        # Weights as loaded from files: remembered by the files' identity (weights_origin.py).
        return remembered_fingerprint(self.backbone.origin, self.model, head + tail, over_every_weight)

    def train(self, mode: bool = True) -> InstEmbEncoder:
        if mode:
            quantize.refuse_training(self.precision, "trained")
        if self.precision == quantize.DEFAULT_PRECISION:
            # Training changes weights, so the fingerprint is taken afresh after. A quantized
            # encoder keeps the one taken on its float weights (it cannot be trained).
            self._fingerprint = None
            self._identity_fingerprints = {}
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
        return embed_inputs(self.model, self.lookahead.vectors, input_ids)

    def states(self, batch: dict[str, torch.Tensor], cache=None, embed_dropout: float = 0.0) -> States:
        """Final-layer states + mask of a collated batch: the one forward path (models/forward.py)."""
        return run_backbone(self.model, self.lookahead.vectors, batch, cache=cache, embed_dropout=embed_dropout)

    def hidden_states(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Final-layer hidden states (after the final norm) for a collated batch."""
        return self.states(batch).hidden

    def forward(self, batch: dict[str, torch.Tensor], lookahead_length: int | None = None) -> torch.Tensor:
        """Un-normalised pooled embeddings [B, d] of a collated batch (differentiable)."""
        length = self.lookahead_length if lookahead_length is None else lookahead_length
        return self.embed_states(self.states(batch), length)

    def embed_states(self, states: States, lookahead_length: int | None = None) -> torch.Tensor:
        """Pooled states through the projection head, if any: the un-normalised embedding.

        Every path that turns final-layer states into an embedding (encode, the shared-prefix
        path, the trainer) goes through here, so none can forget the head.
        """
        length = self.lookahead_length if lookahead_length is None else lookahead_length
        return self.project(self.pooling(states.hidden, states.attention_mask, length))

    def project(self, pooled: torch.Tensor) -> torch.Tensor:
        """Pooled states [..., hidden] through the projection head (identity without one)."""
        return self.projection(pooled) if self.projection is not None else pooled

    # ------------------------------------------------------------------ the Encoder protocol (one space)
    @property
    def document_fingerprint(self) -> str:
        """What decides document vectors: here the whole encoder (an index keys on it)."""
        return self.fingerprint

    @property
    def document_side(self):
        """What embeds documents (sides.py): this LLM."""
        from .sides import DocumentSide, llm_part

        return DocumentSide((llm_part(self),), self.document_fingerprint)

    def query_tokens(self, query: str, instruction: str | None) -> int:
        """Tokens one query runs through: its prefill."""
        return len(self.build_ids(query, instruction))

    def encode_queries(self, queries: Sequence[str], instructions: Instructions = None, **kwargs) -> np.ndarray:
        """One instruction per query (or one string for all, or None); one batched call."""
        return self.encode(queries, instructions, **kwargs)

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        """Documents are embedded once, under one optional instruction."""
        return self.encode(documents, instruction, **kwargs)

    def encode_instructions(self, text: str, instructions: Sequence[str | None], batch_size: int = 32) -> np.ndarray:
        """One text under K instructions [K, d]: the text's key/value cache is computed once.

        Equals ``encode_queries([text] * K, instructions)``; see instemb_rag/encoder/fast/shared_prefix.py.
        """
        from .fast.shared_prefix import encode_instructions

        return encode_instructions(self, text, instructions, batch_size=batch_size)

    # ------------------------------------------------------------------ public encoding API
    def encode(
        self,
        texts: Sequence[str],
        instructions: Instructions = None,
        batch_size: int = 16,
        show_progress: bool = False,
    ) -> np.ndarray:
        """L2-normalised float32 embeddings [N, d], in input order (one prefill per input,
        look-ahead tokens, pooling, the head): what ``encode_queries`` and ``encode_documents`` give.

        Inputs are sorted by token length so each batch pads as little as possible.
        """
        return self.encode_unnormalised(texts, instructions, batch_size, show_progress, normalise=True)

    def encode_unnormalised(
        self,
        texts: Sequence[str],
        instructions: Instructions = None,
        batch_size: int = 16,
        show_progress: bool = False,
        normalise: bool = False,
    ) -> np.ndarray:
        """``encode`` before the L2 normalisation (an anchored two-tower adds it to its anchor)."""
        _, embedded = self.encode_pooled(texts, instructions, batch_size, show_progress)
        if normalise:
            embedded = torch.nn.functional.normalize(embedded, dim=-1)
        return embedded.numpy()

    @torch.inference_mode()
    def encode_pooled(
        self,
        texts: Sequence[str],
        instructions: Instructions = None,
        batch_size: int = 16,
        show_progress: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(pooled states [N, hidden], embeddings [N, d] un-normalised), float32 on the CPU, in input
        order: one prefill per input. The pooled state is what heads beside this encoder read (an
        encoder of parts: its sentence encoder head and gate), from the same pass as the embedding.

        Inputs are sorted by token length so each batch pads as little as possible.
        """
        texts = list(texts)
        for position, text in enumerate(texts):
            if not isinstance(text, str):
                raise InstEmbError(f"Text #{position} is {type(text).__name__}, not a string.")
        per_item = _per_item_instructions(instructions, len(texts))
        pooled_out = torch.zeros((len(texts), self.hidden_size), dtype=torch.float32)
        output = torch.zeros((len(texts), self.dimension), dtype=torch.float32)
        if not texts:
            return pooled_out, output
        if self.device.type == "cuda" and (fast := encode_on_cuda(self, texts, per_item, show_progress)) is not None:
            return fast  # one template call, shape buckets as CUDA graphs, batches by tokens (fast/cuda_graphs.py)
        id_lists = [self.build_ids(text, instruction) for text, instruction in zip(texts, per_item)]
        order = sorted(range(len(id_lists)), key=lambda i: -len(id_lists[i]))
        starts = range(0, len(order), batch_size)
        from ..progress import batches_with_progress  # rich, imported only when a bar may show

        for start in batches_with_progress(starts, show_progress, total_items=len(order), batch_size=batch_size):
            for chunk in forward_runs(order[start : start + batch_size], id_lists, self.device):
                states = self.states(self.collate([id_lists[i] for i in chunk]))
                pooled = self.pooling(states.hidden, states.attention_mask, self.lookahead_length)
                pooled_out[chunk] = pooled.float().cpu()
                output[chunk] = self.project(pooled).float().cpu()
        return pooled_out, output


def _identity_key(extra: dict) -> str:
    return json.dumps(extra, sort_keys=True)
