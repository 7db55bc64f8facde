"""``instemb-rag export --format sentence-transformers``: a separate copy of a model folder that
loads as a ``SentenceTransformer`` (docs/sentence-transformers.md).

Any model folder of this project: an LLM folder (a symmetric model: its encoder files, as
``export_llm_folder`` copies them, with the same inference overrides), a composed folder (two
spaces, the instruction's effect: every part, no trainer state), or None: the shipped default. The
copy gets modules.json, config_sentence_transformers.json and a README saying how to load it.
Folders saved since these files existed hold them already; this is for a copy to hand on, the
shipped default, or a folder written before.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..encoder.composed.config import is_composed
from ..encoder.composed.export import export_model
from ..encoder.llm_folder import is_llm_folder, write_folder_atomically
from ..encoder.st_files import write_sentence_transformers_files
from ..errors import CheckpointError

__all__ = ["README", "export_sentence_transformers"]

README = """\
---
library_name: sentence-transformers
tags:
- sentence-transformers
- instemb-rag
---

# {name}

An instruction-aware embedder of [instemb-rag](https://pypi.org/project/instemb-rag/) ({kind}),
saved so that sentence-transformers loads it. Its module class is part of instemb-rag, so install
that first (`pip install 'instemb-rag[train]'`) and let sentence-transformers import it:

```python
from sentence_transformers import SentenceTransformer

model = SentenceTransformer("{name}", trust_remote_code=True)
queries = model.encode_query(["Which tent should I buy?"], prompt="focus on durability")
documents = model.encode_document(["The Ridgeline 2 weighs 1.9 kg ..."])
scores = model.similarity(queries, documents)
```

The prompt is the query's instruction (placed after the text, as the model was trained); no
prompt is no instruction. The weights of the base LLM are not copied: instemb-rag loads the base
model the folder names (`base_model` in `instemb_config.json`) and checks its fingerprint. `instemb_rag.interop.load_sentence_transformer("{name}")` loads the
same model without `trust_remote_code`.
"""


def export_sentence_transformers(source: str | os.PathLike | None, target: str | os.PathLike, **options) -> Path:
    """Copy ``source`` (None: the shipped default) to ``target`` atomically, with the
    sentence-transformers files and a README. ``options`` (max_length, pooling,
    head_input_weight, sentence encoder) apply to an LLM folder, as in ``export_model``."""
    if source is None:
        from ..encoder.model import SHIPPED_MODEL_FOLDER

        source = SHIPPED_MODEL_FOLDER
    source, target = Path(source), Path(target)
    if is_composed(source):
        if options:
            raise CheckpointError(
                f"{source} is a composed folder: {', '.join(sorted(options))} apply to an LLM folder (export its "
                "documents_llm/, or set a composed folder's knob with instemb-rag compose --from)."
            )
        kind = "an encoder of parts"

        def fill(staging: Path) -> None:
            ignored = shutil.ignore_patterns(".*", "trainer_*")  # a training run's state is no part of the model
            shutil.copytree(source, staging, ignore=ignored, dirs_exist_ok=True)
            write_sentence_transformers_files(staging)
            (staging / "README.md").write_text(README.format(name=target.name, kind=kind), encoding="utf-8")

        write_folder_atomically(target, fill)
        return target
    if not is_llm_folder(source):
        raise CheckpointError(
            f"{source} is not a model folder of instemb-rag (no instemb_config.json or instemb_parts.json): "
            "give an LLM folder or a composed folder."
        )
    export_model(source, target, **options)  # writes the sentence-transformers files too
    readme = README.format(name=target.name, kind="a symmetric InstEmb model (an LLM folder)")
    (target / "README.md").write_text(readme, encoding="utf-8")
    return target
