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
    "two_tower": _OLD_TOWER_KEY,
    "two_spaces": _OLD_TOWER_KEY,
    "effect": _OLD_TOWER_KEY,
}

# Old section names -> new ones: the two-tower recipe's section was "query_tower" before issue 68
# named the LLM side of a two-tower model its query LLM ("tower" names only the arrangement).
RENAMED_SECTIONS: dict[str, str] = {"query_tower": "two_tower"}


def renamed_sections(raw: dict, source: str) -> dict:
    """A config's sections under their current names (an old name read with a DeprecationWarning)."""
    old = [name for name in raw if name in RENAMED_SECTIONS]
    if not old:
        return raw
    both = [name for name in old if RENAMED_SECTIONS[name] in raw]
    if both:
        raise InstEmbError(
            f"{source}: section {both[0]} is an old name of {RENAMED_SECTIONS[both[0]]}; give only one of them."
        )
    import warnings

    warnings.warn(
        f"{source}: section(s) {', '.join(old)} renamed to {', '.join(RENAMED_SECTIONS[name] for name in old)}; "
        "the old names will stop being read.",
        DeprecationWarning,
        stacklevel=3,
    )
    return {RENAMED_SECTIONS.get(name, name): value for name, value in raw.items()}


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
