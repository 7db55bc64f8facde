"""ComposedEncoder: the one encoder of parts. Its parts (parts.py: LLMs, a sentence encoder, heads)
and its two routes (routes.py) are what a model folder lists (config.py); the arrangements are
compositions of them:

    TwoTowerEncoder           documents by the sentence encoder, queries by the LLM into its space
                              (anchored on the sentence encoder's vector of the query, or not)
    TwoSpacesEncoder          documents [A; B] / sqrt 2 (the LLM's and the sentence encoder's),
                              queries [w a; (1 - w) b] from one prefill of the query LLM
    InstructionEffectEncoder  (effect.py) the same documents, queries [s h(effect); M(i + q)]

A symmetric model is its LLM part itself (InstEmbEncoder: both routes through it). Those three
classes only name the parts and routes in their constructors; embedding, identity, saving and
the query side's LLM (what the server and the indexer count tokens with) are all here. Which class
a loaded folder becomes is its query route's ``arrangement`` (a class path; ComposedEncoder when it
names none). It never imports the LLM's module: encoder/references.py loads the LLM parts and assembles
the encoder.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
from torch import nn

from ...errors import InstEmbError
from ...instructions import Instructions
from ...knobs import KNOBS, LLM_WEIGHT, check_knobs
from ..combine import check_llm_weight, mix_scale, two_spaces_scale
from ..modules.projection import Projection
from ..modules.sentence_encoder import SentenceEncoder
from .class_paths import resolve_class
from .config import DOCUMENTS_LLM_DIR, LLM_TYPE, QUERY_LLM_DIR, ModelSpec, PartEntry, write_spec
from .gate import WeightGate
from .parts import is_llm_part, part_files, save_part
from .routes import AnchoredQueries, LLMQueries, SentenceEncoderDocuments, TwoSpacesDocuments, TwoSpacesQueries

__all__ = [
    "ComposedEncoder",
    "TwoSpacesEncoder",
    "TwoTowerEncoder",
    "check_llm_weight",
    "mix_scale",
    "two_spaces_scale",
]

# Where each LLM part of a saved folder lives (any other LLM part: a subfolder of its name).
LLM_DIRS = {"documents_llm": DOCUMENTS_LLM_DIR, "query_llm": QUERY_LLM_DIR}


def of_query_llm(name: str) -> property:
    """An attribute of the query side's LLM, read through: what the server and the indexer count
    tokens with (LocalEncoder), and the LLM's own attributes a two-tower encoder shows as its own."""
    return property(lambda self: getattr(self.query_llm, name), doc=f"The query LLM's ``{name}``.")


def checked_knobs(kwargs: dict) -> dict:
    """Keyword arguments with the query-time knobs among them checked (declared, in range; None left out)."""
    given = {name: kwargs.pop(name) for name in list(kwargs) if name in KNOBS}
    return {**kwargs, **check_knobs(given)}


def of_query_route(name: str) -> property:
    """A setting of the query route (the configured weight, the default strength, ...)."""
    return property(lambda self: getattr(self.query_route, name), doc=f"The query route's ``{name}``.")


class ComposedEncoder(nn.Module):
    """The Encoder protocol (encoder/protocol.py) over named parts and a query and a document route.

    A torch module: its LLM and module parts are registered submodules (``torch_parts``), so
    ``train``/``eval``/``to``/``parameters``/``state_dict`` are torch's. The sentence encoder is
    no torch module (modules/sentence_encoder.py: frozen, in its own dtype): it is in ``parts`` only, and
    follows the query LLM's device (``_apply``)."""

    def __init__(self, parts: dict, query, document, training_info: dict | None = None, sources: dict | None = None):
        super().__init__()
        self.parts = dict(parts)  # every part by name, the sentence encoder too
        # One LLM under two names is one submodule (torch counts its parameters once).
        self.torch_parts = nn.ModuleDict(
            {name: part for name, part in self.parts.items() if isinstance(part, nn.Module)}
        )
        self.query_route, self.document_route = query, document
        self.training_info = training_info or {}
        # The LLM folder each LLM part was loaded from: a save copies it byte for byte (a
        # loaded LLM has its LoRA merged; saving that would write every merged tensor).
        self.sources = {name: Path(path) for name, path in (sources or {}).items() if path is not None}
        self._fingerprint: str | None = None
        missing = sorted({*query.part_names(), *document.part_names()} - set(self.parts))
        if missing:
            raise InstEmbError(f"The routes name parts this encoder lacks: {', '.join(missing)}.")

    @classmethod
    def assemble(cls, parts: dict, query, document, training_info=None, sources=None) -> ComposedEncoder:
        """The arrangement class the routes make (a loaded folder, a view with other parts): the query
        route's ``arrangement``, else ComposedEncoder."""
        arrangement = ComposedEncoder
        if query.arrangement is not None:
            arrangement = resolve_class(query.arrangement, type(query).__name__, "arrangement")
            if not issubclass(arrangement, ComposedEncoder):
                raise InstEmbError(f"{type(query).__name__}.arrangement {query.arrangement} is no ComposedEncoder.")
        encoder = arrangement.__new__(arrangement)
        ComposedEncoder.__init__(encoder, parts, query, document, training_info, sources)
        return encoder

    def with_parts(self, **changes) -> ComposedEncoder:
        """This encoder with some parts (or routes: ``query_route``, ``document_route``) replaced."""
        query, document = (
            changes.pop("query_route", self.query_route),
            changes.pop("document_route", self.document_route),
        )
        sources = {name: path for name, path in self.sources.items() if name not in changes}
        return ComposedEncoder.assemble({**self.parts, **changes}, query, document, self.training_info, sources)

    # ------------------------------------------------------------------ the parts by their roles
    @property
    def query_llm(self):
        return self.parts[self.query_route.llm]

    @property
    def documents_llm(self):
        name = getattr(self.document_route, "llm", None)
        return self.parts[name] if name is not None else None

    @property
    def sentence_encoder(self) -> SentenceEncoder:
        return self.parts[self.document_route.sentence_encoder]

    tower = sentence_encoder  # older name (issue 62)

    def _optional(self, field: str):
        name = getattr(self.query_route, field, None)
        return self.parts[name] if name is not None else None

    @property
    def sentence_encoder_head(self):
        return self._optional("head")

    @property
    def gate(self):
        return self._optional("gate")

    @property
    def effect_map(self):
        return self._optional("effect_map")

    @property
    def has_query_llm(self) -> bool:
        """The query side has an LLM of its own (not the documents' LLM)."""
        return self.query_llm is not self.documents_llm

    @property
    def documents_source(self) -> Path | None:
        return self.sources.get("documents_llm")

    @property
    def query_source(self) -> Path | None:
        return self.sources.get("query_llm")

    def llm_parts(self) -> list:
        """The LLM parts, once each."""
        found = []
        for part in self.parts.values():
            if is_llm_part(part) and all(part is not seen for seen in found):
                found.append(part)
        return found

    # ------------------------------------------------------------------ identity
    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.query_route.fingerprint(self)
        return self._fingerprint

    @property
    def document_fingerprint(self) -> str:
        return self.document_route.fingerprint(self)

    @property
    def dimension(self) -> int:
        return self.document_route.dimension(self)

    @property
    def document_side(self):
        return self.document_route.side(self)

    KIND: str | None = None  # what the label calls the arrangement (None: no label of its own)

    @property
    def label(self) -> str | None:
        return f"{self.KIND} (LLM + {self.sentence_encoder.reference})" if self.KIND else None

    @property
    def llm_dimension(self) -> int:
        return self.documents_llm.dimension

    @property
    def query_knobs(self) -> tuple[str, ...]:
        """The query-time knobs its query route takes (knobs.py's declarations)."""
        return tuple(knob.name for knob in self.query_route.knobs)

    def knob_default(self, name: str) -> float | None:
        """The value of knob ``name`` a query gets when it gives none (None: set per query)."""
        return self.query_route.knob_default(name)

    def __getattr__(self, name: str):
        # takes_<knob> (encoder/protocol.py query_knobs), for each declared knob; then torch's
        # (its submodules, parameters and buffers live in dictionaries it reads here).
        if name.startswith("takes_") and name[len("takes_") :] in KNOBS:
            return name[len("takes_") :] in self.query_knobs
        return super().__getattr__(name)

    # ------------------------------------------------------------------ the query side's LLM (LocalEncoder)
    tokenizer = of_query_llm("tokenizer")
    template = of_query_llm("template")
    settings = of_query_llm("settings")
    max_length = of_query_llm("max_length")
    precision = of_query_llm("precision")
    backbone = of_query_llm("backbone")
    device = of_query_llm("device")
    lookahead_length = of_query_llm("lookahead_length")  # the look-ahead tokens its query LLM runs

    @property
    def quantization_report(self):
        return getattr(self.query_llm, "quantization_report", None)

    def build_ids(self, text: str, instruction: str | None, lookahead_length: int | None = None) -> list[int]:
        return self.query_llm.build_ids(text, instruction, lookahead_length)

    def query_tokens(self, query: str, instruction: str | None) -> int:
        """Tokens one query runs through, over every part its route runs."""
        return self.query_route.tokens(self, query, instruction)

    # ------------------------------------------------------------------ embedding
    def encode_queries(self, queries: Sequence[str], instructions: Instructions = None, **kwargs) -> np.ndarray:
        """One instruction per query (or one for all, or None); the route's knobs as keywords,
        checked here, where they enter (knobs.py)."""
        return self.query_route.encode(self, queries, instructions, **checked_knobs(kwargs))

    def encode_documents(self, documents: Sequence[str], instruction: str | None = None, **kwargs) -> np.ndarray:
        return self.document_route.encode(self, documents, instruction, **kwargs)

    def encode(self, texts: Sequence[str], instructions=None, batch_size: int = 16, show_progress: bool = False):
        """Texts each under its own instruction, embedded as queries are."""
        return self.encode_queries(texts, instructions, batch_size=batch_size, show_progress=show_progress)

    def encode_instructions(self, text: str, instructions: Sequence[str | None], batch_size: int = 32) -> np.ndarray:
        """One text under K instructions [K, d] (equals ``encode_queries([text] * K, instructions)``)."""
        own = getattr(self.query_route, "encode_instructions", None)
        if own is not None:
            return own(self, text, instructions, batch_size)
        return self.encode_queries([text] * len(instructions), list(instructions), batch_size=batch_size)

    def query_by_space(self, queries: Sequence[str], instructions: Instructions = None, *args, **kwargs):
        return self.query_route.query_by_space(self, queries, instructions, *args, **kwargs)

    def documents_by_space(self, documents: Sequence[str], batch_size: int = 16, show_progress: bool = False):
        return self.document_route.by_space(self, documents, batch_size, show_progress)

    def explain(self, query: str, instruction: str | None, documents: Sequence[str] | np.ndarray, **knob) -> list[dict]:
        """Per document, what each space gives and what ranks (routes.py: the knob's routes only).
        ``documents``: texts, or their vectors as ``encode_documents`` gave them (an index's stored
        ones: nothing is embedded again)."""
        if not hasattr(self.query_route, "explain"):
            raise InstEmbError("This encoder embeds each side in one space: there is nothing to explain.")
        return self.query_route.explain(self, query, instruction, documents, **checked_knobs(knob))

    def route_by_space(self, pooled, embedded, anchors):
        return self.query_route.route_by_space(self, pooled, embedded, anchors)

    # Older names ("halves" before issue 68 named a vector's parts by their spaces).
    query_halves = query_by_space  # alias kept for compatibility (issue 68 names round 2)
    document_halves = documents_by_space  # alias kept for compatibility (issue 68 names round 2)
    route_halves = route_by_space  # alias kept for compatibility (issue 68 names round 2)

    def route_effect(self, under_instruction, under_reference, strength: float | None = None):
        return self.query_route.route_effect(self, under_instruction, under_reference, strength)

    def route_queries(self, pooled, anchors):
        return self.query_route.route_queries(self, pooled, anchors)

    # ------------------------------------------------------------------ modes and devices (torch's)
    def train(self, mode: bool = True) -> ComposedEncoder:
        """torch's (``eval`` is ``train(False)``); the fingerprint is taken afresh after, as
        training changes weights."""
        super().train(mode)
        self._fingerprint = None
        return self

    def _apply(self, fn, recurse: bool = True):
        # What torch's to/cuda/cpu/half run over the registered parts; the sentence encoder, no
        # torch module, then goes to the query LLM's device in its own dtype.
        super()._apply(fn, recurse)
        self.sentence_encoder.to(self.device)
        return self

    def with_options(self, **settings) -> ComposedEncoder:
        """Every LLM part under other settings (``InstEmbEncoder.with_options``), sharing its weights."""
        views = {name: part.with_options(**settings) for name, part in self.parts.items() if is_llm_part(part)}
        return self.with_parts(**views) if any(views[n] is not self.parts[n] for n in views) else self

    # ------------------------------------------------------------------ saving
    def spec(self, entries: dict[str, PartEntry], files: list[str] | None = None) -> ModelSpec:
        routes = {"query": self.query_route.config(), "document": self.document_route.config()}
        return ModelSpec(parts=entries, routes=routes, training=self.training_info, files=files)

    def save(self, folder: str | os.PathLike, also=None, savers: dict | None = None) -> None:
        """Write the folder atomically: each part in its subfolder (an LLM loaded from a folder
        copied byte for byte), instemb_parts.json listing the parts and routes, and the files that
        make it load as a SentenceTransformer. ``savers`` (part name -> ``save(llm, subfolder)``)
        write an LLM part their way (the trainer: its trained tensors in its dtype); ``also`` writes
        more files beside the parts (the trainer's state) inside the same swap."""
        import shutil

        from ..llm_folder import write_folder_atomically
        from ..st_files import write_sentence_transformers_files

        def fill(staging: Path) -> None:
            entries, written = {}, {}
            for name, part in self.parts.items():
                if not is_llm_part(part):
                    entries[name] = save_part(name, part, staging)
                    continue
                path = LLM_DIRS.get(name, name)
                same = next((other for other, done in written.items() if done is part), None)
                if same is not None:  # one LLM under two names: saved once
                    entries[name] = entries[same]
                    continue
                if savers and name in savers:
                    savers[name](part, staging / path)
                elif name in self.sources:
                    shutil.copytree(
                        self.sources[name], staging / path, ignore=shutil.ignore_patterns(".*", "trainer_*")
                    )
                else:
                    part.save(staging / path)
                entries[name], written[name] = PartEntry(type=LLM_TYPE, path=path), part
            write_spec(staging, self.spec(entries, part_files(staging, entries)))
            write_sentence_transformers_files(staging)
            if also is not None:
                also(staging)

        write_folder_atomically(Path(folder), fill)
        self._fingerprint = None


class TwoTowerEncoder(ComposedEncoder):
    """Documents by a sentence encoder (the sentence encoder), queries by the LLM (``query_llm``, with a head
    into the sentence encoder's space), anchored on the sentence encoder's vector of "instruction + query" or not. The
    LLM's own attributes (its config, head, hidden size) are this encoder's too."""

    def __init__(
        self, llm, sentence_encoder: SentenceEncoder, anchored: bool = False, training_info=None, query_source=None
    ):
        head = llm.projection
        if head is None or head.dimension != sentence_encoder.dimension:
            raise InstEmbError(
                f"A two-tower encoder needs a projection head (unblended) into its document sentence encoder's "
                f"{sentence_encoder.dimension}-dimensional space; this one has "
                f"{'none' if head is None else f'a {head.dimension}-dimensional output'}."
            )
        query = AnchoredQueries() if anchored else LLMQueries()
        super().__init__(
            {"query_llm": llm, "sentence_encoder": sentence_encoder},
            query,
            SentenceEncoderDocuments(),
            training_info,
            {"query_llm": query_source},
        )

    @property
    def is_two_tower(self) -> bool:
        return True

    @property
    def anchored(self) -> bool:
        return self.query_route.anchor

    def with_anchor(self, anchored: bool = True) -> TwoTowerEncoder:
        return self.with_parts(query_route=AnchoredQueries() if anchored else LLMQueries())

    def with_projection(self, projection: Projection | None) -> TwoTowerEncoder:
        return TwoTowerEncoder(
            self.query_llm.with_projection(projection), self.sentence_encoder, self.anchored, self.training_info
        )

    config = of_query_llm("config")
    projection = of_query_llm("projection")
    hidden_size = of_query_llm("hidden_size")
    pooling = of_query_llm("pooling")
    lookahead_length = of_query_llm("lookahead_length")

    def encode_unnormalised(self, texts, instructions=None, **kwargs) -> np.ndarray:
        return self.query_llm.encode_unnormalised(texts, instructions, **kwargs)


class TwoSpacesEncoder(ComposedEncoder):
    """Documents ``[A; B] / sqrt(2)``: the documents' LLM's own vector (a symmetric InstEmb encoder,
    frozen) and the sentence encoder's, each normalised. Queries from one prefill of ``query_llm``
    (the documents' LLM with a query-side adapter, or that LLM itself): the LLM-space vector, the sentence encoder's
    (its vector of "instruction + query" plus the sentence encoder head's correction)
    and the weight w (the caller's ``llm_weight``, else the gate's, else the configured one), as
    ``[w a; (1 - w) b]`` normalised. The score of a document is then ``(w cos(a, A) + (1 - w)
    cos(b, B)) * two_spaces_scale(w)``: it ranks as the weighted sum. Untrained (no query LLM, head or
    gate) it is the two spaces at the fixed weight; the trainer (training/two_spaces/) starts every
    query-side part at zero, so its step 0 is exactly that model."""

    def __init__(
        self,
        documents_llm,
        sentence_encoder: SentenceEncoder,
        query_llm=None,
        sentence_encoder_head: Projection | None = None,
        gate: WeightGate | None = None,
        llm_weight: float = LLM_WEIGHT.default,
        training_info: dict | None = None,
        documents_source: str | os.PathLike | None = None,
        query_source: str | os.PathLike | None = None,
    ):
        if sentence_encoder_head is not None and sentence_encoder_head.dimension != sentence_encoder.dimension:
            raise InstEmbError(
                f"The sentence encoder head maps into {sentence_encoder_head.dimension} dimensions, the sentence encoder has {sentence_encoder.dimension}."
            )
        if query_llm is not None and query_llm.dimension != documents_llm.dimension:
            raise InstEmbError("The query LLM's embeddings are not in the documents' LLM space (another width).")
        parts = {"documents_llm": documents_llm, "sentence_encoder": sentence_encoder}
        optional = {"query_llm": query_llm, "sentence_encoder_head": sentence_encoder_head, "gate": gate}
        parts.update({name: part for name, part in optional.items() if part is not None})
        query = TwoSpacesQueries(
            llm="query_llm" if query_llm is not None else "documents_llm",
            head="sentence_encoder_head" if sentence_encoder_head is not None else None,
            gate="gate" if gate is not None else None,
            llm_weight=llm_weight,
        )
        sources = {"documents_llm": documents_source, "query_llm": query_source if query_llm is not None else None}
        super().__init__(parts, query, TwoSpacesDocuments(), training_info, sources)

    KIND = "two spaces"
    llm_weight = of_query_route("llm_weight")

    def with_llm_weight(self, llm_weight: float) -> TwoSpacesEncoder:
        """This encoder (shared parts) with another configured weight and no gate: a new view."""
        parts = {name: part for name, part in self.parts.items() if name != self.query_route.gate}
        query = TwoSpacesQueries(
            self.query_route.llm, self.query_route.sentence_encoder, self.query_route.head, None, llm_weight
        )
        return ComposedEncoder.assemble(parts, query, self.document_route, self.training_info, self.sources)
