"""The encoder of parts: a model folder lists its parts and a query route and a document route
over them (the shape of sentence-transformers v5's modules.json + Router).

config.py   instemb_parts.json (format 2: parts and routes, each type a class path)
class_paths.py  a type's class path, imported (instemb-rag's own classes only)
legacy.py   the one converter of every older layout into the same spec
spec.py     read_spec: any folder's parts and routes; llm_folder_of (was llm_checkpoint_of)
parts.py    the parts (the LLM, the sentence encoder, module parts: Projection, WeightGate,
            EffectMap, any class with load/save/get_config_dict/state_tensors)
routes.py   the document routes (SentenceEncoderDocuments, TwoSpacesDocuments) and query routes (LLMQueries,
            AnchoredQueries, TwoSpacesQueries, EffectQueries); their math is encoder/combine.py's
encoder.py  ComposedEncoder; TwoTowerEncoder and TwoSpacesEncoder name its parts and routes
effect.py   InstructionEffectEncoder (the instruction's effect)
gate.py, effect_map.py   the gate and the effect map (parts)
concat.py, pasted.py     concat: and pasted: references (two encoders side by side; a sentence
                         encoder with the instruction pasted)
export.py   export_model: a copy of any model folder with new inference settings, or two-tower
"""

from __future__ import annotations

from .config import PARTS_FILE, is_composed
from .spec import llm_checkpoint_of, llm_folder_of

__all__ = ["PARTS_FILE", "is_composed", "llm_checkpoint_of", "llm_folder_of"]
