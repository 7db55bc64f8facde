"""Frozen-prefix state cache: the hidden states entering the lowest trainable layer, per input.

When a run trains only the top K decoder layers (fully or through LoRA) and the final norm, with
the look-ahead vectors and every layer below ``N - K`` frozen, the states entering layer
``N - K`` are a fixed function of the input (encoder/modules/layer_split.py). They are computed once per
distinct input (text + instruction) and stored here, so each step runs only the top K layers.

Layout of ``<root>/<key>/``:

    meta.json                  what the key covers (prefix fingerprint, split, template, L, max_length, dtype)
    index.json                 input key -> [shard, first row, token count]; only complete shards
    shard-00000.safetensors    "states" [tokens, d] (float16 by default), the inputs' rows one after the other

The key hashes everything that shapes these states, so a changed model, K, template or length
gets its own folder, never stale states; ``describe_other_caches`` names the ones it replaced.
Building is resumable and interrupt-safe: a shard is written whole (atomically) before the index
names it, so a kill loses at most the shard in progress. Shards are read through safetensors'
memory map: a batch reads only its own rows.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from safetensors import safe_open
from safetensors.torch import save as save_tensors

from ..atomic import write_atomically, write_text_atomically
from ..encoder.modules.layer_split import layer_count, run_top, states_below
from ..errors import InstEmbError

CACHE_FORMAT = 1
SHARD_TOKENS = 200_000  # ~230 MB of float16 states at d=576


def input_key(text: str, instruction: str | None) -> str:
    return hashlib.sha256(f"{text}\0{instruction or ''}".encode()).hexdigest()[:32]


def prefix_fingerprint(encoder, split: int, dtype: torch.dtype = torch.float16) -> str:
    """Hash of every tensor that shapes the states entering layer ``split``: the token embeddings,
    the look-ahead vectors and the layers below, plus the template, L and max_length."""
    digest = hashlib.sha256()
    identity = {
        "format": CACHE_FORMAT,
        "split": split,
        "template": encoder.template.get_config_dict(),
        "lookahead_length": encoder.lookahead_length,
        "max_length": encoder.max_length,
        "base": encoder.backbone.fingerprint,
        "dtype": str(dtype),
    }
    digest.update(json.dumps(identity, sort_keys=True).encode())
    digest.update(encoder.lookahead.vectors.detach().float().cpu().numpy().tobytes())
    for name, param in sorted(encoder.model.named_parameters(), key=lambda item: item[0]):
        if _below(name, split):
            digest.update(name.encode())
            digest.update(param.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:32]


def _below(name: str, split: int) -> bool:
    """Whether a backbone tensor acts below layer ``split`` (embeddings, or a lower decoder layer)."""
    if "embed_tokens" in name:
        return True
    parts = name.split(".")
    for position, part in enumerate(parts[:-1]):
        if part == "layers" and parts[position + 1].isdigit():
            return int(parts[position + 1]) < split
    return False


def read_shard_index(folder: Path, what_then: str) -> dict[str, list[int]]:
    """``folder/index.json`` of a sharded cache (input key -> shard and rows); empty before its first shard."""
    path = folder / "index.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InstEmbError(f"{path} is damaged ({exc}); delete {folder} and {what_then}.") from exc


@dataclass(frozen=True)
class CachedInput:
    states: torch.Tensor  # [T, d] in the cache's dtype
    length: int


class PrefixCache:
    """The cached states of one encoder prefix (one key); see the module docstring."""

    def __init__(self, root: str | Path, encoder, trainable_top_layers: int, dtype: torch.dtype = torch.float16):
        total = layer_count(encoder.model)
        if not 0 < trainable_top_layers < total:
            raise InstEmbError(
                f"The frozen-prefix cache needs 0 < trainable_top_layers < {total} (the model's layers); "
                f"got {trainable_top_layers}."
            )
        self.split = total - trainable_top_layers
        self.encoder = encoder
        # float16 halves the disk and memory of the cache (max |diff| ~1e-2 on SmolLM2's states);
        # float32 makes cached steps equal uncached ones to rounding (the exactness test uses it).
        self.dtype = dtype
        self.root = Path(root)
        self.key = prefix_fingerprint(encoder, self.split, dtype)
        self.folder = self.root / self.key
        self.folder.mkdir(parents=True, exist_ok=True)
        meta = {"format": CACHE_FORMAT, "split": self.split, "layers": total, "key": self.key}
        meta_path = self.folder / "meta.json"
        if not meta_path.is_file():
            write_text_atomically(meta_path, json.dumps(meta, indent=2))
        self.index: dict[str, list[int]] = read_shard_index(self.folder, "the cache is built again")
        self._handles: dict[int, object] = {}

    def describe_other_caches(self) -> list[str]:
        """Cache folders beside this one: built for another model, K, template or length."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir() and p.name != self.key)

    def missing(self, inputs: Sequence[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
        seen: set[str] = set()
        out = []
        for text, instruction in inputs:
            key = input_key(text, instruction)
            if key not in self.index and key not in seen:
                seen.add(key)
                out.append((text, instruction))
        return out

    def estimate(self, inputs: Sequence[tuple[str, str | None]]) -> tuple[int, int]:
        """(tokens, bytes) the missing inputs will add."""
        tokens = sum(len(self.encoder.build_ids(text, instruction)) for text, instruction in self.missing(inputs))
        return tokens, tokens * self.encoder.hidden_size * self.dtype.itemsize

    # ------------------------------------------------------------------ building
    def build(self, inputs: Sequence[tuple[str, str | None]], batch_size: int = 16, log=print) -> None:
        """Compute and store the states of every input not cached yet (resumable)."""
        todo = self.missing(inputs)
        if not todo:
            return
        id_lists = [self.encoder.build_ids(text, instruction) for text, instruction in todo]
        tokens = sum(len(ids) for ids in id_lists)
        log(
            f"prefix cache: {len(todo)} inputs, {tokens:,} tokens, "
            f"{tokens * self.encoder.hidden_size * self.dtype.itemsize / 2**20:,.0f} MiB to add under {self.folder}"
        )
        order = sorted(range(len(todo)), key=lambda i: len(id_lists[i]))  # similar lengths: little padding
        pending: list[tuple[str, torch.Tensor]] = []
        pending_tokens, done_tokens, started = 0, 0, time.perf_counter()
        self.encoder.eval()
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            batch = self.encoder.collate([id_lists[i] for i in chunk], padding_side="right")
            hidden = states_below(self.encoder.model, self.encoder.lookahead.vectors, batch, self.split)
            for row, index in enumerate(chunk):
                length = len(id_lists[index])
                pending.append((input_key(*todo[index]), hidden[row, :length].to(self.dtype).cpu()))
                pending_tokens += length
            if start == 0 and len(order) > batch_size:  # the first batch's rate gives the estimate
                rate = pending_tokens / (time.perf_counter() - started)
                log(f"prefix cache: {rate:,.0f} tokens/s, about {tokens / rate / 60:.1f} min to build")
            if pending_tokens >= SHARD_TOKENS:
                done_tokens += self._write_shard(pending)
                pending, pending_tokens = [], 0
                rate = done_tokens / (time.perf_counter() - started)
                log(
                    f"prefix cache: {done_tokens:,}/{tokens:,} tokens, ~{(tokens - done_tokens) / rate / 60:.1f} min left"
                )
        if pending:
            self._write_shard(pending)

    def _write_shard(self, rows: list[tuple[str, torch.Tensor]]) -> int:
        shard = 1 + max((entry[0] for entry in self.index.values()), default=-1)
        states = torch.cat([tensor for _, tensor in rows])
        path = self.folder / f"shard-{shard:05d}.safetensors"
        payload = save_tensors({"states": states.contiguous()})
        write_atomically(path, lambda stream: stream.write(payload))
        first = 0
        for key, tensor in rows:
            self.index[key] = [shard, first, int(tensor.shape[0])]
            first += int(tensor.shape[0])
        write_text_atomically(self.folder / "index.json", json.dumps(self.index))
        return int(states.shape[0])

    # ------------------------------------------------------------------ reading
    def get(self, text: str, instruction: str | None) -> CachedInput:
        key = input_key(text, instruction)
        if key not in self.index:
            raise InstEmbError(f"Input not in the prefix cache {self.folder}: build it first (PrefixCache.build).")
        shard, first, length = self.index[key]
        handle = self._handles.get(shard)
        if handle is None:
            path = self.folder / f"shard-{shard:05d}.safetensors"
            try:
                handle = safe_open(str(path), framework="pt")
            except Exception as exc:  # safetensors raises its own error types for a damaged file
                raise InstEmbError(f"{path} cannot be read ({exc}); delete {self.folder} to rebuild it.") from exc
            self._handles[shard] = handle
        return CachedInput(handle.get_slice("states")[first : first + length], length)

    def batch(self, inputs: Sequence[tuple[str, str | None]], device, trim: int = 0) -> dict[str, torch.Tensor]:
        """Right-padded cached states [B, T, d] (float32) with attention mask and position ids.

        ``trim``: leave out each input's last ``trim`` positions (its look-ahead slots, for a pass
        over the bare input: causal attention kept the earlier states blind to them)."""
        rows = [self.get(text, instruction) for text, instruction in inputs]
        lengths = [row.length - trim for row in rows]
        width = max(lengths)
        hidden = torch.zeros(len(rows), width, self.encoder.hidden_size)
        mask = torch.zeros(len(rows), width, dtype=torch.long)
        for position, (row, length) in enumerate(zip(rows, lengths)):
            hidden[position, :length] = row.states[:length].float()
            mask[position, :length] = 1
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        return {"hidden": hidden.to(device), "attention_mask": mask.to(device), "position_ids": positions.to(device)}


def pooled_embeddings(encoder, cache: PrefixCache, inputs: list[tuple[str, str | None]]) -> torch.Tensor:
    """The student's pooled (un-projected) embeddings of cached inputs: the top K layers, then pooling."""
    batch = cache.batch(inputs, encoder.device)
    hidden = run_top(encoder.model, batch["hidden"], batch["attention_mask"], batch["position_ids"], cache.split)
    return encoder.pooling(hidden, batch["attention_mask"], encoder.lookahead_length)
