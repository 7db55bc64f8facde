"""A sentence-transformers folder run without sentence-transformers (issue 60: a lean cold start).

``import sentence_transformers`` takes seconds (it pulls scikit-learn, pandas and transformers'
trainer) and is only needed to run a sentence encoder such as all-MiniLM-L6-v2 at query time. The
folder says what to run, in its own files, and this reads them:

    modules.json                    Transformer (the model folder) -> Pooling -> Normalize (optional)
    sentence_bert_config.json       max_seq_length / do_lower_case (sentence-transformers 2-5), or
                                    the 6.x keys (feature extraction of the last hidden state)
    <pooling path>/config.json      the pooling mode(s): ``pooling_mode`` (6.x) or the older
                                    ``pooling_mode_*_tokens`` flags
    config.json, tokenizer files    transformers' own model class (BertModel, MPNetModel: imported
                                    directly, ``AutoModel`` only for another architecture), its
                                    weights memory-mapped (instemb_rag/hf_models.py)

The vectors equal sentence-transformers' (tests/teachers/test_st_folder.py compares both):
the same tokenizer call, length-sorted batches, pooling and normalisation. A folder with anything
else (a Dense layer, weighted-mean pooling, tokenizer or model arguments) is not guessed at:
``UnsupportedSentenceFolder`` says what, and the caller loads it with sentence-transformers. The
folder itself is only read, so it stays loadable by ``SentenceTransformer(folder)``.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..errors import InstEmbError

__all__ = ["SentenceEncoderModel", "UnsupportedSentenceFolder", "read_pipeline"]


class UnsupportedSentenceFolder(InstEmbError):
    """The folder uses sentence-transformers features this reader does not run (load it with the library)."""


# Pooling modes run here, in the order sentence-transformers' older flags list them.
POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
}
# sentence_bert_config.json of a plain text encoder: the keys read, and those that must hold these values.
TRANSFORMER_KEYS = {"max_seq_length", "do_lower_case"}
PLAIN_FEATURE_EXTRACTION = {
    "transformer_task": "feature-extraction",
    "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
    "module_output_name": "token_embeddings",
}
# Argument dictionaries that change nothing when empty (older folders write them so).
EMPTY_ARGUMENTS = {"model_args", "tokenizer_args", "config_args", "model_kwargs", "processor_kwargs", "config_kwargs"}


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise InstEmbError(
            f"{path} ({what}) cannot be read: {error}. The sentence encoder's folder is damaged."
        ) from None


def _module_kind(entry: dict) -> str:
    """``Transformer``, ``Pooling``, ``Normalize`` for sentence-transformers' own modules (any of
    their import paths: ``sentence_transformers.models.Pooling``, ``...modules.pooling.Pooling``)."""
    kind = str(entry.get("type", ""))
    return kind.rsplit(".", 1)[-1] if kind.startswith("sentence_transformers.") else kind


def read_pipeline(folder: Path) -> dict:
    """What ``modules.json`` and the modules' configs say to run: the transformer's folder and
    settings, the pooling modes and whether the output is normalised. Raises
    ``UnsupportedSentenceFolder`` for anything else."""
    modules = _read_json(folder / "modules.json", "the module list")
    if not isinstance(modules, list) or not modules:
        raise UnsupportedSentenceFolder(f"{folder} has no module list (modules.json).")
    kinds = [_module_kind(entry) for entry in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
        raise UnsupportedSentenceFolder(
            f"{folder}: modules {kinds} (this reader runs Transformer, Pooling, Normalize)."
        )
    transformer_dir = folder / modules[0].get("path", "")
    return {
        "transformer_dir": transformer_dir,
        **_transformer_settings(transformer_dir),
        "pooling": _pooling_modes(folder / modules[1].get("path", "")),
        "normalize": kinds[-1] == "Normalize",
    }


def _transformer_settings(transformer_dir: Path) -> dict:
    """max_seq_length (None: the tokenizer's own) and do_lower_case of the Transformer module."""
    raw = _read_json(transformer_dir / "sentence_bert_config.json", "the Transformer module's config") or {}
    for key, value in raw.items():
        plain = key in TRANSFORMER_KEYS or (key in EMPTY_ARGUMENTS and not value)
        if not plain and PLAIN_FEATURE_EXTRACTION.get(key, object()) != value:
            raise UnsupportedSentenceFolder(f"{transformer_dir}: the Transformer module sets {key}={value!r}.")
    return {"max_seq_length": raw.get("max_seq_length"), "do_lower_case": bool(raw.get("do_lower_case", False))}


def _pooling_modes(pooling_dir: Path) -> tuple[str, ...]:
    raw = _read_json(pooling_dir / "config.json", "the Pooling module's config") or {}
    if "pooling_mode" in raw:
        modes = raw["pooling_mode"]
        modes = (modes,) if isinstance(modes, str) else tuple(modes)
    else:
        modes = tuple(mode for flag, mode in POOLING_FLAGS.items() if raw.get(flag))
        others = [
            key for key, value in raw.items() if key.startswith("pooling_mode_") and value and key not in POOLING_FLAGS
        ]
        if others:
            raise UnsupportedSentenceFolder(f"{pooling_dir}: pooling {others}.")
    unknown = [mode for mode in modes if mode not in POOLING_FLAGS.values()]
    if not modes or unknown:
        raise UnsupportedSentenceFolder(
            f"{pooling_dir}: pooling modes {list(modes)} (runs {list(POOLING_FLAGS.values())})."
        )
    return modes


def pool(token_embeddings: torch.Tensor, attention_mask: torch.Tensor, modes: Sequence[str]) -> torch.Tensor:
    """sentence-transformers' Pooling over padded token states [B, T, d]: each mode's vector,
    concatenated in the configured order."""
    mask = attention_mask.unsqueeze(-1).to(token_embeddings.dtype)
    vectors = []
    for mode in modes:
        if mode == "cls":
            first = attention_mask.to(torch.int).argmax(dim=1)
            index = first[:, None, None].expand(-1, 1, token_embeddings.shape[-1])
            vectors.append(torch.gather(token_embeddings, 1, index).squeeze(1))
        elif mode == "max":
            vectors.append(
                token_embeddings.masked_fill(mask.expand_as(token_embeddings) == 0, float("-inf")).max(dim=1).values
            )
        else:
            total = (token_embeddings * mask).sum(dim=1)
            count = torch.clamp(mask.sum(dim=1), min=1e-9)
            vectors.append(total / (count if mode == "mean" else torch.sqrt(count)))
    return torch.cat(vectors, dim=-1)


class SentenceEncoderModel(nn.Module):
    """A sentence-transformers folder's Transformer, Pooling and Normalize: ``encode`` as the
    library's (the arguments the project passes), ``tokenizer``, ``max_seq_length``, parameters."""

    def __init__(self, transformer: nn.Module, tokenizer, pooling: Sequence[str], normalize: bool):
        super().__init__()
        self.transformer = transformer
        self.tokenizer = tokenizer
        self.pooling_modes = tuple(pooling)
        self.normalize = normalize
        # The tokenizer outputs the model reads (BERT: ids, mask, token types; MPNet: no token types).
        self.forward_inputs = frozenset(inspect.signature(transformer.forward).parameters)

    @classmethod
    def load(cls, folder: str | Path, device: str = "cpu") -> SentenceEncoderModel:
        folder = Path(folder)
        pipeline = read_pipeline(folder)
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        from ..hf_models import load_pretrained

        hf_logging.disable_progress_bar()  # the "Loading weights" bar
        transformer_dir = pipeline["transformer_dir"]
        # dtype as sentence-transformers loads it: the library's default (the checkpoint's own)
        transformer = load_pretrained(transformer_dir, "base")
        tokenizer = AutoTokenizer.from_pretrained(str(transformer_dir), local_files_only=True)
        _set_max_length(tokenizer, transformer.config, pipeline["max_seq_length"])
        if pipeline["do_lower_case"]:
            _lowercase_first(tokenizer)
        model = cls(transformer, tokenizer, pipeline["pooling"], pipeline["normalize"])
        return model.to(device).eval()

    @property
    def max_seq_length(self) -> int:
        """Tokens read of a text (the rest is cut)."""
        return int(self.tokenizer.model_max_length)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def get_embedding_dimension(self) -> int:
        return int(self.transformer.config.hidden_size) * len(self.pooling_modes)

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """Sentence vectors [B, dimension] of a tokenized batch (normalised when the folder says so)."""
        states = self.transformer(**features).last_hidden_state
        vectors = pool(states, features["attention_mask"], self.pooling_modes)
        return nn.functional.normalize(vectors, p=2, dim=1) if self.normalize else vectors

    @torch.inference_mode()
    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        show_progress_bar: bool = False,
        convert_to_numpy: bool = True,
        normalize_embeddings: bool = False,
    ) -> np.ndarray | torch.Tensor:
        """[N, dimension] vectors in input order; batches of texts sorted longest first (by
        characters, as sentence-transformers sorts them, so the batches pad alike)."""
        texts = list(texts)
        order = np.argsort([-len(text) for text in texts])
        output = torch.zeros((len(texts), self.get_embedding_dimension()), dtype=torch.float32)
        from ..progress import batches_with_progress  # rich, imported only when a bar may show

        starts = range(0, len(texts), batch_size)
        for start in batches_with_progress(starts, show_progress_bar, total_items=len(texts), batch_size=batch_size):
            rows = order[start : start + batch_size]
            features = self.tokenizer(
                [texts[row] for row in rows], padding=True, truncation="longest_first", return_tensors="pt"
            )
            vectors = self(
                {name: tensor.to(self.device) for name, tensor in features.items() if name in self.forward_inputs}
            )
            if normalize_embeddings:
                vectors = nn.functional.normalize(vectors, p=2, dim=1)
            output[torch.as_tensor(rows)] = vectors.float().cpu()
        return output.numpy() if convert_to_numpy else output


def _set_max_length(tokenizer, config, max_seq_length: int | None) -> None:
    """The window as sentence-transformers sets it: the folder's max_seq_length, else the
    tokenizer's own capped at the model's positions."""
    if max_seq_length is not None:
        tokenizer.model_max_length = int(max_seq_length)
    elif getattr(config, "max_position_embeddings", -1) not in (None, -1):
        tokenizer.model_max_length = min(tokenizer.model_max_length, config.max_position_embeddings)


def _lowercase_first(tokenizer) -> None:
    """``do_lower_case``: a Lowercase normaliser in front of the tokenizer's own, as
    sentence-transformers adds one (unless the normaliser already is or holds one)."""
    from tokenizers.normalizers import Lowercase
    from tokenizers.normalizers import Sequence as NormalizerSequence

    backend = tokenizer.backend_tokenizer
    normalizer = backend.normalizer
    if isinstance(normalizer, Lowercase) or (
        isinstance(normalizer, NormalizerSequence) and any(isinstance(part, Lowercase) for part in normalizer)
    ):
        return
    parts = [Lowercase()]
    if isinstance(normalizer, NormalizerSequence):
        parts += list(normalizer)
    elif normalizer is not None:
        parts.append(normalizer)
    backend.normalizer = NormalizerSequence(parts)
