"""``InstEmbModule``: a model folder of this project as one sentence-transformers module.

Every folder this project writes names this class in its ``modules.json`` (encoder/st_files.py),
so ``SentenceTransformer(folder, trust_remote_code=True)`` loads it (sentence-transformers 6 asks
for ``trust_remote_code`` before importing any module class outside its own namespace, an
installed package's too; ``instemb_rag.interop.load_sentence_transformer`` passes the class
instead). The module holds no weights of its own: it loads the folder with
``InstEmbEncoder.from_pretrained`` and embeds with the encoder's own ``encode_queries`` /
``encode_documents``, so a vector is the project's, whichever arrangement the folder holds.

How a call reaches it (sentence-transformers 6.2, base/model.py and sentence_transformer/model.py):
``encode_query(texts, prompt=...)`` is ``encode(..., task="query")``; ``encode`` resolves the
prompt (``prompt``, else ``prompt_name`` in ``model.prompts``; ``encode_query`` without either
takes the saved ``"query"`` prompt, "") and calls the first module's
``preprocess(batch, prompt=prompt, task=task, **kwargs)``, then ``forward(features, task=...)``
with the kwargs this module declares (``forward_kwargs``). The prompt arrives apart from the
texts, so it is the instruction, and the encoder's template puts it after the text, as everywhere
in this project. sentence-transformers glues a prompt in front of the texts only when
``preprocess`` raises ``TypeError`` (its fallback for modules without a ``prompt`` argument), so
``preprocess`` here never raises one. No prompt, or a blank one, is no instruction.

Routes: ``task="query"`` embeds queries, ``"document"`` (``"passage"``, ``"corpus"``) documents;
a plain ``encode`` embeds a query when it is given an instruction, else documents. The model's
query-time knob (knobs.py: a two-space model's weight, an instruction-effect model's strength) is
an ``encode_query`` keyword, by its name.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from sentence_transformers.base.modules import InputModule

from ..errors import InstEmbError
from ..instructions import normalize_instruction

__all__ = ["LOAD_OPTIONS", "InstEmbModule", "route"]

QUERY_TASKS = frozenset({"query"})
DOCUMENT_TASKS = frozenset({"document", "passage", "corpus"})
# InstEmbEncoder.from_pretrained's settings, accepted as SentenceTransformer(..., model_kwargs={...}).
LOAD_OPTIONS = ("precision", "pooling", "lookahead_length", "max_length")


def route(task: str | None, instruction: str | None) -> str:
    """The route, "query" or "document": the task sentence-transformers passes, else a query
    when an instruction is given (documents read none), else documents."""
    if task in QUERY_TASKS:
        return "query"
    if task in DOCUMENT_TASKS:
        return "document"
    if task is None:
        return "query" if instruction is not None else "document"
    raise InstEmbError(
        f"task={task!r}: an InstEmb model embeds queries (task='query', encode_query) and documents "
        f"(task='document', encode_document)."
    )


class InstEmbModule(InputModule):
    """The whole model as one input module: ``preprocess`` keeps the texts and the instruction,
    ``forward`` embeds them through the encoder's own methods."""

    save_in_root = True
    config_keys: list[str] = []

    def __init__(self, folder: str | None = None, **options: Any):
        super().__init__()
        unknown = sorted(set(options) - set(LOAD_OPTIONS))
        if unknown:
            raise InstEmbError(
                f"model_kwargs {unknown} are not settings of an InstEmb model; it takes {', '.join(LOAD_OPTIONS)} "
                "(InstEmbEncoder.from_pretrained's)."
            )
        self.folder = folder
        self.options = {key: value for key, value in options.items() if value is not None}
        self.__dict__["_encoder"] = None  # not a submodule: loaded lazily (concat:/pasted: encoders are no nn.Module)
        # Where sentence-transformers put the model (model.to(device) moves buffers): the encoder
        # loads there and follows it (_apply).
        self.register_buffer("device_probe", torch.empty(0), persistent=False)

    @classmethod
    def load(
        cls,
        model_name_or_path: str,
        subfolder: str = "",
        token: bool | str | None = None,
        cache_folder: str | None = None,
        revision: str | None = None,
        local_files_only: bool = False,
        model_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> InstEmbModule:
        """The folder (a Hub repository is downloaded first); ``model_kwargs`` are LOAD_OPTIONS."""
        folder = cls.load_dir_path(
            model_name_or_path,
            subfolder=subfolder,
            token=token,
            cache_folder=cache_folder,
            revision=revision,
            local_files_only=local_files_only,
        )
        return cls(folder, **(model_kwargs or {}))

    # ------------------------------------------------------------------ the encoder
    @property
    def encoder(self):
        """The folder's encoder, as ``InstEmbEncoder.from_pretrained`` gives it, on the model's device."""
        if self.__dict__["_encoder"] is None:
            from ..encoder.load import load_model

            device = str(self.device_probe.device)
            self.__dict__["_encoder"] = load_model(self.folder, device=device, **self.options)
        return self.__dict__["_encoder"]

    def on_model_ready(self, model) -> None:
        self.encoder  # noqa: B018 -- load now, on the device the model was put on, so errors show at load

    def _apply(self, fn, recurse: bool = True):
        super()._apply(fn, recurse)
        encoder = self.__dict__["_encoder"]
        if encoder is not None and torch.device(encoder.device) != self.device_probe.device:
            encoder.to(self.device_probe.device)  # a device move; a dtype change stays the encoder's own
        return self

    @property
    def forward_kwargs(self) -> set[str]:
        """``task``, and the model's query-time knob (protocol.query_knob)."""
        from ..encoder.protocol import query_knob

        knob = query_knob(self.encoder)
        return {"task"} | ({knob} if knob else set())

    @property
    def tokenizer(self):
        return self.encoder.tokenizer

    @property
    def max_seq_length(self) -> int:
        return self.encoder.max_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        raise InstEmbError(
            "An InstEmb model's token limit is a load setting: SentenceTransformer(folder, trust_remote_code=True, "
            f"model_kwargs={{'max_length': {value}}})."
        )

    def get_embedding_dimension(self) -> int:
        return self.encoder.dimension

    # ------------------------------------------------------------------ embedding
    def preprocess(
        self, inputs: Sequence[Any], prompt: str | None = None, task: str | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        """The texts as they are and the instruction (the prompt); never a TypeError, which would
        make sentence-transformers paste the prompt in front of the texts and call again."""
        try:
            texts = list(inputs)
            bad = next((text for text in texts if not isinstance(text, str)), None)
            if bad is not None:
                raise InstEmbError(f"An InstEmb model embeds text; got a {type(bad).__name__} ({bad!r:.60}).")
            return {"texts": texts, "instruction": normalize_instruction(prompt), "task": task}
        except TypeError as error:
            raise InstEmbError(f"Cannot read the inputs as texts and one instruction: {error}") from None

    def forward(self, features: dict[str, Any], task: str | None = None, **knobs: Any) -> dict[str, Any]:
        task = features.get("task") or task
        vectors = self.embed(features["texts"], features["instruction"], task, knobs)
        features["sentence_embedding"] = torch.from_numpy(vectors).to(self.device_probe.device)
        return features

    def embed(self, texts: list[str], instruction: str | None, task: str | None, knobs: dict) -> np.ndarray:
        """The encoder's own vectors: ``encode_queries(texts, instruction)`` (the knob passed on)
        or ``encode_documents(texts)`` (with the instruction where one is given: a symmetric model
        embeds documents under it, a two-space one refuses it with its own message)."""
        knobs = {name: value for name, value in knobs.items() if value is not None}
        batch = {"batch_size": max(len(texts), 1)}  # sentence-transformers' batch is the encoder's
        if route(task, instruction) == "query":
            return self.encoder.encode_queries(texts, instruction, **knobs, **batch)
        if knobs:
            raise InstEmbError(f"{', '.join(sorted(knobs))} is a query-time knob: pass it to encode_query.")
        if instruction is None:
            return self.encoder.encode_documents(texts, **batch)
        return self.encoder.encode_documents(texts, instruction, **batch)

    # ------------------------------------------------------------------ saving
    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """The encoder's own save (atomic: it replaces ``output_path``, writing modules.json and
        config_sentence_transformers.json too); a config_sentence_transformers.json
        sentence-transformers wrote there first (its prompts) is kept."""
        from pathlib import Path

        from ..encoder.st_files import ST_CONFIG_FILE

        written = Path(output_path) / ST_CONFIG_FILE
        kept = written.read_bytes() if written.is_file() else None
        self.encoder.save(output_path)
        if kept is not None:
            written.write_bytes(kept)

    def __repr__(self) -> str:
        return f"InstEmbModule(folder={self.folder!r}, options={self.options})"
