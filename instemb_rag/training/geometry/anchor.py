"""The anchor targets of a geometry run: the starting LLM's own pooled embeddings.

The embedding a geometry candidate ships may blend the pooled embedding back in
(``geometry.train_input_weight``, models/projection.py); that part carries what the starting
checkpoint learned from its labels (SciFact abstracts, stance) only if the trained layers keep
it. The anchor term (losses/geometry.py ``relational_kl``) holds the student's pooled similarity
rows to those of the starting LLM, computed here once, before any step, from the
frozen-prefix cache, and kept in the run folder so a resumed run reads the same targets.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save

from ...atomic import write_atomically
from ...errors import InstEmbError

ANCHOR_FILE = "anchor_targets.safetensors"


def anchor_targets(
    output_dir: Path,
    inputs_key: str,
    pooled_of: Callable[[list[int]], torch.Tensor],
    shape: tuple[int, int],
    batches: list[list[int]],
    log=print,
) -> torch.Tensor:
    """[count, hidden] (``shape``) pooled embeddings of the starting LLM, read from the run folder when
    it holds those of the same inputs (``inputs_key``), computed batch by batch otherwise."""
    path = output_dir / ANCHOR_FILE
    if path.is_file():
        with safe_open(str(path), framework="pt") as stored:
            same = (stored.metadata() or {}).get("inputs_key") == inputs_key
            pooled = stored.get_tensor("pooled")
        if same and tuple(pooled.shape) == tuple(shape):
            return pooled
        raise InstEmbError(
            f"{path} holds anchor targets of other inputs (another texts file or count). They belong "
            "to the run that wrote them: start this one in a new training.output_dir."
        )
    pooled = torch.zeros(shape)
    with torch.no_grad():
        for number, batch in enumerate(batches):
            pooled[batch] = pooled_of(batch).float().cpu()
            if (number + 1) % 50 == 0:
                log(f"anchor targets: {number + 1}/{len(batches)} batches")
    payload = save({"pooled": pooled.contiguous()}, metadata={"inputs_key": inputs_key})
    write_atomically(path, lambda stream: stream.write(payload))
    log(f"anchor targets: {shape[0]} pooled embeddings of the starting LLM saved to {path}")
    return pooled
