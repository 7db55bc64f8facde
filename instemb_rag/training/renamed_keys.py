"""Old training option names, read in one place: a config or saved run written before a rename
still loads into the new field, with a DeprecationWarning (training/args.py calls ``renamed``)."""

from __future__ import annotations

from ..errors import InstEmbError

# Old option names -> new ones, per section: configs and saved runs (train_config.json, a
# checkpoint's training info) written before the rename still load, with a warning. "teacher" now
# means only a sentence encoder (instemb_rag/teachers/); the frozen copy of the LLM is "frozen_llm".
# The sentence encoder of the two-tower, two-space and effect recipes was "document_tower", then
# "tower" (issue 54), before it was "sentence_encoder" (issue 62: one name per concept); this table
# is the one place the old names are read.
_OLD_TOWER_KEY = {"document_tower": "sentence_encoder", "tower": "sentence_encoder"}
RENAMED_KEYS: dict[str, dict[str, str]] = {
    "training": {"teacher_cache": "llm_target_cache", "teacher_cache_dir": "llm_target_cache_dir"},
    "query_tower": _OLD_TOWER_KEY,
    "two_spaces": _OLD_TOWER_KEY,
    "effect": _OLD_TOWER_KEY,
}


def renamed(section: str, values: dict, source: str) -> dict:
    renames = RENAMED_KEYS.get(section, {})
    old = [key for key in values if key in renames]
    if not old:
        return values
    both = [key for key in old if renames[key] in values or [renames[other] for other in old].count(renames[key]) > 1]
    if both:
        raise InstEmbError(
            f"{source}: {section}.{both[0]} is an old name of {section}.{renames[both[0]]}; give only one of them."
        )
    import warnings

    warnings.warn(
        f"{source}: {section}.{', '.join(old)} renamed to "
        f"{', '.join(section + '.' + renames[key] for key in old)}; the old names will stop being read.",
        DeprecationWarning,
        stacklevel=3,
    )
    return {renames.get(key, key): value for key, value in values.items()}
