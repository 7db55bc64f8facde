"""A model folder with a reader: the folder copied, the reader added as a part with a ``rerank`` route.

The reader changes no stored vector, so nothing else in the folder changes: its vectors and
fingerprints are the source folder's (references.py leaves a reader part out of the encoder), and an
index built with the source folder is searched with the new one as it was.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..errors import CheckpointError

__all__ = ["READER_DIR", "with_reader"]

READER_DIR = "reader"
READER_FILES = ("config.json", "adapter.safetensors", "head.safetensors")


def with_reader(
    model_folder: str | Path,
    reader_folder: str | Path,
    out: str | Path,
    fusion_weight: float | None = None,
    top: int | None = None,
) -> Path:
    """Write ``out``: ``model_folder`` with the trained reader ``reader_folder`` (a run's final/) as its
    ``reader`` part; the route's fusion weight is the reader's calibrated one unless given."""
    from ..encoder.composed.config import PARTS_FILE, RERANK_ROUTE, ModelSpec, PartEntry, write_spec
    from ..encoder.composed.spec import read_spec
    from ..encoder.llm_folder import write_folder_atomically
    from .model import ReaderModel
    from .reranker import DEFAULT_TOP, RerankRoute, bare_reader_route

    model_folder, reader_folder, out = Path(model_folder), Path(reader_folder), Path(out)
    if not (model_folder / PARTS_FILE).is_file():
        raise CheckpointError(
            f"{model_folder} is not a model folder of parts ({PARTS_FILE} missing): a reader is added to a folder "
            "that `instemb-rag compose` or the trainer wrote, or to the shipped default (instemb_rag/default_checkpoint)."
        )
    missing = [name for name in READER_FILES if not (reader_folder / name).is_file()]
    if missing:
        raise CheckpointError(
            f"reader folder {reader_folder} lacks {', '.join(missing)}: use a training run's final/ folder."
        )
    ReaderModel.from_folder(reader_folder, merged=False)  # refuses a reader whose base is not installed here
    calibrated = bare_reader_route(reader_folder) if fusion_weight is None else None
    route = RerankRoute(
        reader=READER_DIR,
        fusion_weight=float(fusion_weight if fusion_weight is not None else calibrated.fusion_weight),
        top=int(top or DEFAULT_TOP),
    )
    spec = read_spec(model_folder)

    def fill(staging: Path) -> None:
        for item in model_folder.iterdir():
            if item.name == READER_DIR or item.name.startswith("."):
                continue
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, staging / item.name)
        (staging / READER_DIR).mkdir()
        for name in READER_FILES:
            shutil.copy2(reader_folder / name, staging / READER_DIR / name)
        fusion = reader_folder / "fusion.json"
        if fusion.is_file():  # provenance of the weight (the validation table it was chosen on)
            shutil.copy2(fusion, staging / READER_DIR / "fusion.json")
        parts = {**spec.parts, READER_DIR: PartEntry(type="instemb_rag.reader.model.ReaderModel", path=READER_DIR)}
        routes = {**spec.routes, RERANK_ROUTE: route.config()}
        reader_files = sorted(f"{READER_DIR}/{path.name}" for path in (staging / READER_DIR).iterdir())
        files = sorted({*(spec.files or []), *reader_files})
        write_spec(staging, ModelSpec(parts=parts, routes=routes, training=spec.training, files=files))

    write_folder_atomically(out, fill)
    json.loads((out / PARTS_FILE).read_text(encoding="utf-8"))
    return out
