"""Where an LLM's weights came from, so that its fingerprint can be remembered by its files.

An encoder's fingerprint hashes every backbone weight as it is in memory (model.py), half a
gigabyte for the default: most of a second of every cold start. Weights loaded from files and not
changed since are decided by those files' bytes and by how they were loaded (dtype, device, a
merged LoRA, the torch and transformers releases), so their fingerprint is remembered under the
files' identity (hashing.py's fingerprint cache) and hashed again only when a file changes.

"Not changed since": the origin records each parameter's storage and version counter when it is
taken (``WeightsOrigin.taken``, at the end of a load). Any in-place change through torch (an
optimizer step, ``copy_``, a LoRA merge, a quantization) bumps a version counter and a replaced
parameter has another storage, so the origin no longer holds and the weights are hashed as they
are. Writes that bypass the version counter (``param.data.mul_()``, writes through a NumPy view)
are not seen: code here never changes weights that way.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..hashing import cached_fingerprint

__all__ = ["WeightsOrigin", "remembered_fingerprint"]

RECIPE = "instemb llm fingerprint, v1"  # the identity of model.py's recipe in the cache's keys


@dataclass(frozen=True)
class WeightsOrigin:
    """The files a model's parameters were read from, how they were read, and the parameters'
    state when they were (storage and version of each, by name)."""

    files: tuple[Path, ...]
    how: tuple[tuple[str, str], ...]
    state: tuple[tuple[str, int, int], ...]

    @classmethod
    def taken(cls, model, files: Iterable[Path], **how) -> WeightsOrigin | None:
        """The origin of ``model``'s parameters as they are now (None where they cannot be told
        apart later: inference tensors keep no version counter)."""
        state = parameter_state(model)
        if state is None:
            return None
        described = {key: str(value) for key, value in how.items()}
        return cls(tuple(sorted({Path(path).resolve() for path in files})), tuple(sorted(described.items())), state)

    def holds_for(self, model) -> bool:
        """Whether ``model``'s parameters are still the ones loaded (same storage, no in-place change)."""
        return parameter_state(model) == self.state

    def context(self, model) -> dict:
        """What decides the parameters besides the files' bytes (a key of the fingerprint cache)."""
        return {
            "how": dict(self.how),
            "tensors": [[name, str(p.dtype), list(p.shape), p.device.type] for name, p in _named_parameters(model)],
            "torch": _version_of("torch"),
            "transformers": _version_of("transformers"),
        }


def parameter_state(model) -> tuple[tuple[str, int, int], ...] | None:
    try:
        return tuple((name, p.data_ptr(), p._version) for name, p in _named_parameters(model))
    except RuntimeError:  # an inference tensor: no version counter
        return None


def _named_parameters(model):
    return sorted(model.named_parameters(), key=lambda item: item[0])


def _version_of(package: str) -> str | None:
    module = sys.modules.get(package)
    return getattr(module, "__version__", None) if module is not None else None


def remembered_fingerprint(
    origin: WeightsOrigin | None, model, cheap_parts: Sequence[bytes], compute: Callable[[], str]
) -> str:
    """``compute()`` (the fingerprint over every weight), remembered by the origin's files while the
    origin holds; ``cheap_parts``: the rest of what the fingerprint hashes (its identity JSON,
    look-ahead vectors, head), small enough to go into the key as they are now."""
    if origin is None or not origin.holds_for(model):
        return compute()
    digest = hashlib.sha256()
    for part in cheap_parts:
        digest.update(hashlib.sha256(part).digest())
    context = {"recipe": RECIPE, "cheap_parts": digest.hexdigest(), **origin.context(model)}
    return cached_fingerprint(origin.files, context, compute)
