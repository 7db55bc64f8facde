"""The data layer: what training and evaluation read, built from the development sets.

    registry.py              the one registry a data source is added to (records, items, facets)
    records.py               training records (text, instruction, output, negatives, group)
    builders.py              records of the registered sets, split by group and capped
    qa_sets.py, contrast_sets.py, generic_sets.py   the record builders, by kind of set
    instruction_templates.py instruction wordings the items and contrast sets draw from
    embedding_items.py       the items a geometry run embeds (queries with instructions, passages)
    geometry_sources.py      readers turning each development set into embedding items
    geometry_texts.py        the items file (`build-distill-texts`): read, filter, de-duplicate, cap
    facet_groups.py          the facet-groups format, its loader and its embedding items
    facet_sources/           facet groups built from general-domain data (`build-facet-groups`)

Nothing here imports training/ or eval/: both import this.
"""
