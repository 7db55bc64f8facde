"""The hand-written training facet groups (research/data/facet_groups_train.jsonl) as distillation
items. The file format and its loader are instemb_rag/facet_groups.py's (the held-out dev groups
in eval_sets/ share the format and no subject with these)."""

from __future__ import annotations

from ..facet_groups import FacetGroup
from .distill_items import DistillItem


def facet_group_items(groups: list[FacetGroup], source: str = "facet_groups") -> list[DistillItem]:
    """Each group's passages; its query under each instruction (positive: that facet's passage);
    and its query alone (no positive: every passage answers it a little)."""
    items = []
    for group in groups:
        passage_of = {passage.facet: f"{source}:{passage.id}" for passage in group.passages}
        common = {"source": source, "group": group.group, "unit": group.group}
        items += [
            DistillItem(id=passage_of[p.facet], role="passage", text=p.text.strip(), **common) for p in group.passages
        ]
        items.append(DistillItem(id=f"{source}:{group.group}-q", role="query", text=group.query.strip(), **common))
        for position, instruction in enumerate(group.instructions):
            items.append(
                DistillItem(
                    id=f"{source}:{group.group}-q{position + 1}",
                    role="query",
                    text=group.query.strip(),
                    instruction=instruction.text.strip(),
                    positive=passage_of[instruction.facet],
                    **common,
                )
            )
    return items
