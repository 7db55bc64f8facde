"""Reranker: the reader's second stage over the first stage's top hits, fused (issue 67).

    fused = first-stage score + fusion_weight * sigmoid(reader logit)

The first-stage score is what ``Index.search`` returns (the cosine of the encoder's unit query and
document vectors); the reader's logit goes through a sigmoid so that its part is bounded by the
fusion weight, which was chosen on held-out training-side records (training/reader/run.py): plain
search keeps the first stage's order where the reader sees no difference, and the instruction's
meaning decides among candidates the first stage scores alike. Only the top ``top`` hits are read
(the route's default, chosen by measurement); they are re-ordered by the fused score and stay
above the rest, which keep their first-stage scores and order.

A model folder carries the reader as a part and a ``rerank`` route (format 3):

    "parts":  {..., "reader": {"type": "instemb_rag.reader.model.ReaderModel", "path": "reader"}}
    "routes": {..., "rerank": {"type": "instemb_rag.reader.reranker.RerankRoute", "reader": "reader",
                               "fusion_weight": 0.3, "top": 10}}

The reader changes no stored vector: the encoder's fingerprints leave it out, and an index built
before the reader keeps working.
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..encoder.composed.config import RERANK_ROUTE
from ..errors import CheckpointError, InstEmbError

__all__ = [
    "RERANK_ROUTE",
    "ReaderMissingError",
    "RerankResult",
    "RerankRoute",
    "Reranker",
    "fused_scores",
    "has_reader",
    "reader_of_encoder",
]

FUSION_FILE = "fusion.json"  # beside a trained reader (training/reader/run.py): its calibrated weight
DEFAULT_TOP = 10


class ReaderMissingError(InstEmbError):
    """A model folder without a reader (no ``rerank`` route), or a reader folder that is incomplete."""


@dataclass(frozen=True)
class RerankRoute:
    """The ``rerank`` route of a model folder: which part reads, its fusion weight, how many hits it reads."""

    reader: str
    fusion_weight: float
    top: int = DEFAULT_TOP

    def config(self) -> dict:
        return {
            "type": f"{type(self).__module__}.{type(self).__qualname__}",
            "reader": self.reader,
            "fusion_weight": self.fusion_weight,
            "top": self.top,
        }

    def part_names(self) -> tuple[str, ...]:
        return (self.reader,)

    @classmethod
    def from_config(cls, raw: dict, where: str) -> RerankRoute:
        values = {key: value for key, value in raw.items() if key != "type"}
        try:
            route = cls(**values)
        except TypeError as error:
            raise CheckpointError(f"{where}: the rerank route takes reader, fusion_weight and top ({error}).") from None
        if not isinstance(route.fusion_weight, (int, float)) or route.fusion_weight < 0:
            raise CheckpointError(f"{where}: the rerank route's fusion_weight must be a number >= 0.")
        if not isinstance(route.top, int) or route.top < 1:
            raise CheckpointError(f"{where}: the rerank route's top must be a positive integer.")
        return route


def fused_scores(first_stage: Sequence[float], logits: Sequence[float], weight: float) -> list[float]:
    """first + weight * sigmoid(logit), per candidate."""
    return [float(first) + weight / (1.0 + math.exp(-logit)) for first, logit in zip(first_stage, logits)]


@dataclass(frozen=True)
class RerankResult:
    """One query's candidates as the reader saw them: fused scores, its own logits, how many were cut."""

    fused: list[float]
    reader_logits: list[float]
    cut: int  # candidates longer than the reader's window (their ends were not read)


def _read_route(folder: Path) -> tuple[RerankRoute, Path]:
    """The rerank route of a model folder and its reader part's folder."""
    from ..encoder.composed.config import PARTS_FILE

    where = folder / PARTS_FILE
    try:
        raw = json.loads(where.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{where}: not readable ({error}); copy the whole model folder again.") from error
    route_config = (raw.get("routes") or {}).get(RERANK_ROUTE)
    if route_config is None:
        raise ReaderMissingError(
            f"model folder {folder} has no reader (no '{RERANK_ROUTE}' route in {PARTS_FILE}): search with "
            "--no-rerank, or add one (instemb-rag compose --reader FOLDER)."
        )
    route = RerankRoute.from_config(route_config, str(where))
    part = (raw.get("parts") or {}).get(route.reader)
    if not isinstance(part, dict) or not part.get("path"):
        raise CheckpointError(f"{where}: the rerank route names part '{route.reader}', which the folder does not list.")
    return route, folder / part["path"]


def bare_reader_route(folder: Path) -> RerankRoute:
    """A reader folder as training writes it (config.json, weights, fusion.json beside them)."""
    fusion = folder / FUSION_FILE
    if not fusion.is_file():
        raise ReaderMissingError(
            f"reader folder {folder} has no {FUSION_FILE} (the fusion weight training calibrates); "
            "use the run's final/ folder or a model folder with a rerank route."
        )
    weight = json.loads(fusion.read_text(encoding="utf-8"))["weight"]
    return RerankRoute(reader=".", fusion_weight=float(weight))


class Reranker:
    """The reader and its fusion: ``score`` gives the fused scores exactly as the product ranks them."""

    def __init__(self, model, route: RerankRoute, source: Path | None = None):
        self.model = model
        self.route = route
        self.source = source
        self._lock = threading.Lock()  # one forward at a time: the resident process serves threads

    @property
    def top(self) -> int:
        return self.route.top

    @property
    def fusion_weight(self) -> float:
        return self.route.fusion_weight

    @classmethod
    def from_pretrained(cls, folder: str | Path | None = None, device: str = "cpu") -> Reranker:
        """The reader of a model folder (its ``rerank`` route; None: the shipped default) or of a
        trained reader folder (``final/`` of a run: config, weights and fusion.json)."""
        from ..shipped import SHIPPED_FOLDER
        from .model import ReaderModel

        folder = Path(folder) if folder is not None else SHIPPED_FOLDER
        if not folder.is_dir():
            raise ReaderMissingError(
                f"reader folder {folder} does not exist; search with --no-rerank or name a folder that does."
            )
        if (folder / "instemb_parts.json").is_file():
            route, reader_folder = _read_route(folder)
        else:
            route, reader_folder = bare_reader_route(folder), folder
        model = ReaderModel.from_folder(reader_folder, device=device, merged=True)
        return cls(model, route, folder)

    def scored(
        self, query: str, instruction: str | None, texts: Sequence[str], first_stage_scores: Sequence[float]
    ) -> RerankResult:
        if len(texts) != len(first_stage_scores):
            raise ValueError(
                f"{len(texts)} texts but {len(first_stage_scores)} first-stage scores: give one score per text."
            )
        if not texts:
            return RerankResult([], [], 0)
        with self._lock:
            logits, cut = self.model.logits(query, instruction, list(texts))
        return RerankResult(fused_scores(first_stage_scores, logits, self.fusion_weight), logits, cut)

    def score(
        self, query: str, instruction: str | None, texts: Sequence[str], first_stage_scores: Sequence[float]
    ) -> list[float]:
        """The fused score of each text under (query, instruction); None or blank instruction: plain search."""
        return self.scored(query, instruction, texts, first_stage_scores).fused


def has_reader(folder: str | Path) -> bool:
    """Whether a model folder names a reader (a ``rerank`` route), read from its JSON alone."""
    from ..encoder.composed.config import PARTS_FILE

    try:
        raw = json.loads((Path(folder) / PARTS_FILE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return isinstance(raw, dict) and RERANK_ROUTE in (raw.get("routes") or {})


_LOADED: dict[tuple[str, int], Reranker | None] = {}
_LOADING = threading.Lock()


def reader_of_encoder(encoder) -> Reranker | None:
    """The reader of the folder ``encoder`` was loaded from (None: it has none), looked up once per
    folder and version of its instemb_parts.json: a query pays a stat, not a read of the JSON (the
    resident process serves many queries)."""
    from ..encoder.composed.config import PARTS_FILE

    folder = getattr(encoder, "model_folder", None)
    if folder is None:
        return None
    try:
        key = (str(Path(folder).resolve()), (Path(folder) / PARTS_FILE).stat().st_mtime_ns)
    except OSError:
        return None
    with _LOADING:
        if key not in _LOADED:
            _LOADED[key] = Reranker.from_pretrained(folder) if has_reader(folder) else None
        return _LOADED[key]
