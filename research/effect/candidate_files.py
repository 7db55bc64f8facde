"""Issue 61's candidates under research/checkpoints/ keep only what they trained.

    python research/effect/candidate_files.py pack NAME [--half]   # before committing the candidate
    python research/effect/candidate_files.py unpack NAME   # before loading it (--model research/checkpoints/NAME)

A candidate's ``query_llm/`` is the shipped LLM with its LoRA trained on in the top layers only
(training/effect/query_llm.py): of ``lora/adapter_model.safetensors`` (3.9 MB) two thirds of the
tensors equal the shipped adapter's byte for byte. ``pack`` writes the tensors that differ to
``lora/trained_layers.safetensors`` with a digest of the whole adapter's tensors
(``trained_layers.json``) and removes the adapter file, so the repository's working tree stays
under the 64 MiB device transfer; ``unpack`` rebuilds it from the shipped adapter
(``instemb_rag/default_checkpoint/documents_llm``, which ``documents_llm`` links to) and checks the
digest. ``documents_llm/`` is a link to the shipped LLM, as for effect-r1. ``--half`` keeps the
trained tensors in float16 (half the bytes; the digest is then the rounded adapter's, and
``trained_layers.json`` says so): the candidate committed is the scored one rounded to float16.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "instemb_rag" / "default_checkpoint" / "documents_llm" / "lora" / "adapter_model.safetensors"
ADAPTER, TRAINED, DIGEST = "adapter_model.safetensors", "trained_layers.safetensors", "trained_layers.json"


def digest(tensors: dict) -> str:
    """sha256 over the tensors' names, dtypes, shapes and bytes, in name order."""
    import torch

    hasher = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        hasher.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}".encode())
        hasher.update(tensor.view(-1).view(torch.uint8).numpy().tobytes())
    return hasher.hexdigest()


def pack(name: str, *options: str) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    lora = ROOT / "research" / "checkpoints" / name / "query_llm" / "lora"
    tensors, shipped = load_file(str(lora / ADAPTER)), load_file(str(SHIPPED))
    if set(tensors) != set(shipped):
        raise SystemExit(f"{lora / ADAPTER} and the shipped adapter name different tensors: not a query-side LoRA.")
    trained = {key: tensor for key, tensor in tensors.items() if not torch.equal(tensor, shipped[key])}
    if options not in ((), ("--half",)):
        raise SystemExit(f"unknown options {options}: the only one is --half")
    half = options == ("--half",)
    if half:  # the rebuilt adapter is float32 again, with these tensors rounded
        trained = {key: tensor.half() for key, tensor in trained.items()}
        tensors = tensors | {key: tensor.float() for key, tensor in trained.items()}
    save_file(trained, str(lora / TRAINED))
    record = {"tensors": len(tensors), "trained": len(trained), "sha256": digest(tensors)}
    record["stored"] = "float16 (the scored float32 tensors, rounded)" if half else "float32 (as scored)"
    (lora / DIGEST).write_text(json.dumps(record))
    (lora / ADAPTER).unlink()
    print(f"{name}: {len(trained)} of {len(tensors)} tensors kept in {lora / TRAINED}")


def unpack(name: str) -> None:
    from safetensors.torch import load_file, save_file

    lora = ROOT / "research" / "checkpoints" / name / "query_llm" / "lora"
    expected = json.loads((lora / DIGEST).read_text())
    trained = {key: tensor.float() for key, tensor in load_file(str(lora / TRAINED)).items()}
    tensors = load_file(str(SHIPPED)) | trained
    if digest(tensors) != expected["sha256"]:
        raise SystemExit(
            f"{name}: the rebuilt adapter differs from the one scored (the shipped adapter changed?); "
            "rebuild the candidate with its recipe in research/checkpoints/README.md."
        )
    save_file(tensors, str(lora / ADAPTER), metadata={"format": "pt"})
    print(f"{name}: {lora / ADAPTER} rebuilt ({expected['tensors']} tensors, digest checked)")


if __name__ == "__main__":
    {"pack": pack, "unpack": unpack}[sys.argv[1]](*sys.argv[2:])
