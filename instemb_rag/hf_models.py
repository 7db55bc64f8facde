"""transformers' model classes, imported directly, with weights memory-mapped from safetensors.

Resolving a class through transformers' Auto machinery imports its registries, and
``from_pretrained`` builds the library's checkpoint-conversion table (about 1,200 regular
expressions, most of a second on a slow CPU, once per process) to rename the keys of older
checkpoints. The folders a query loads hold neither: the default LLM's cache is written from the
model's own ``state_dict`` (backbone.py) and a sentence encoder's folder by ``save_pretrained``.
So, for an architecture known here and a folder whose one ``model.safetensors`` holds exactly the
class's tensors under their own names, the model is built without initialising its weights and
takes the file's tensors as they are mapped (``assign``: no copy; a write, such as merging a LoRA,
copies only the pages it touches, never the file). Anything else (an unknown architecture, a
sharded or renamed checkpoint) goes through ``from_pretrained`` as before, of the class imported
directly where it is known, of the Auto class otherwise. Both give the same tensors
(tests/test_hf_models.py).
"""

from __future__ import annotations

import atexit
import importlib
import json
import logging
import sys
from pathlib import Path

__all__ = ["BASE_MODELS", "CAUSAL_LMS", "known_class", "load_pretrained", "model_class", "quiet_dynamo_exit_report"]

WEIGHTS_FILE = "model.safetensors"
# model_type (config.json) -> (module, class), imported directly.
CAUSAL_LMS = {"llama": ("transformers.models.llama.modeling_llama", "LlamaForCausalLM")}
BASE_MODELS = {
    "bert": ("transformers.models.bert.modeling_bert", "BertModel"),
    "mpnet": ("transformers.models.mpnet.modeling_mpnet", "MPNetModel"),
}
AUTO_CLASSES = {"causal_lm": "AutoModelForCausalLM", "base": "AutoModel"}
_DYNAMO_REPORT_WRAPPED = False  # quiet_dynamo_exit_report, once per process


def model_type(folder: Path) -> str | None:
    try:
        return json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError):
        return None  # from_pretrained reports what is wrong with the folder


def known_class(folder: Path, kind: str):
    """transformers' class for ``folder``'s architecture (``kind``: "causal_lm" or "base"),
    imported directly; None for an architecture not listed here."""
    known = (CAUSAL_LMS if kind == "causal_lm" else BASE_MODELS).get(model_type(folder))
    if known is None:
        return None
    module, name = known
    return getattr(importlib.import_module(module), name)


def model_class(folder: Path, kind: str):
    """The known class, else transformers' Auto class (which reads the folder's config)."""
    cls = known_class(folder, kind)
    if cls is None:
        import transformers

        cls = getattr(transformers, AUTO_CLASSES[kind])
    return cls


def load_pretrained(folder: str | Path, kind: str, dtype=None, **options):
    """The model in ``folder`` (``options``: ``attn_implementation``; ``dtype`` None: the stored
    one): a known class memory-mapped where the folder allows, else ``from_pretrained``."""
    folder = Path(folder)
    known = known_class(folder, kind)
    model = _load_mapped(known, folder, dtype, options) if known is not None else None
    if model is None:
        stored_dtype = {} if dtype is None else {"dtype": dtype}  # None: the library's default, the stored one
        model = (known or model_class(folder, kind)).from_pretrained(
            str(folder), local_files_only=True, **stored_dtype, **options
        )
    quiet_dynamo_exit_report()
    return model


def _load_mapped(cls, folder: Path, dtype, options: dict):
    """The model built with no weight initialisation, its tensors those of the mapped file; None
    when the file's names are not exactly the class's (from_pretrained converts them)."""
    weights = folder / WEIGHTS_FILE
    if not weights.is_file():
        return None
    from safetensors.torch import load_file
    from transformers.initialization import no_init_weights

    tensors = load_file(str(weights))  # memory-mapped, copy-on-write
    config = cls.config_class.from_pretrained(str(folder), local_files_only=True)
    config.name_or_path = str(folder)  # as from_pretrained records it
    stored = next((tensor.dtype for tensor in tensors.values() if tensor.is_floating_point()), None)
    with no_init_weights():
        model = cls._from_config(config, dtype=dtype or stored, **options)
    own = set(model.state_dict()) - _tied_names(model)
    # Older files also store buffers the class now rebuilds itself (BERT's position ids): dropped,
    # as from_pretrained drops them.
    rebuilt = {name for name, _ in model.named_buffers()}
    tensors = {name: tensor for name, tensor in tensors.items() if name in own or name not in rebuilt}
    if set(tensors) != own:
        return None
    if dtype is not None:
        tensors = {name: tensor.to(dtype) if tensor.is_floating_point() else tensor for name, tensor in tensors.items()}
    model.load_state_dict(tensors, strict=False, assign=True)
    model.tie_weights()
    return model.eval()


def _tied_names(model) -> set[str]:
    """The output head's weight when it is tied to the input embeddings (stored once, as those)."""
    if not getattr(model.config, "tie_word_embeddings", False) or not hasattr(model, "get_output_embeddings"):
        return set()
    output = model.get_output_embeddings()
    return {f"{name}.weight" for name, module in model.named_modules() if output is not None and module is output}


def quiet_dynamo_exit_report() -> None:
    """Run torch._dynamo's exit report only where it would be seen.

    transformers' model code imports torch._dynamo, which registers an exit hook that formats the
    compile times with ``tabulate`` (importing it and wcwidth's tables: a tenth of a second or more,
    at every exit of a process that never compiled) for a log line that is off unless that logger
    is at INFO. The hook is kept, behind that test, taken at exit as torch would log it.
    """
    global _DYNAMO_REPORT_WRAPPED
    utils = sys.modules.get("torch._dynamo.utils")
    report = getattr(utils, "dump_compile_times", None)
    if report is None or _DYNAMO_REPORT_WRAPPED:
        return

    def report_if_logged() -> None:
        if utils.log.isEnabledFor(logging.INFO):
            report()

    atexit.unregister(report)
    atexit.register(report_if_logged)
    _DYNAMO_REPORT_WRAPPED = True
