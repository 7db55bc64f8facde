"""The inputs tests/training/data/batch_orders_before_issue45.json was recorded on (test_batch_order.py)."""

import random

from instemb_rag.datasets.embedding_items import EmbeddingItem
from instemb_rag.datasets.records import TrainingRecord


def inputs():
    rng = random.Random(7)
    groups = [rng.choice([None, None, "g1", "g2", "g3", "g4", "g5"]) for _ in range(45)]
    lengths = [rng.randint(5, 90) for _ in range(45)]
    items = []
    for n in range(40):
        role = "query" if n % 3 == 0 else "passage"
        items.append(
            EmbeddingItem(
                id=f"i{n}",
                role=role,
                text=f"text {n}",
                group=rng.choice([None, "a", "b", "c"]),
                positive=f"i{n + 1}" if role == "query" and n % 2 == 0 else None,
                source="s",
            )
        )
    item_lengths = [rng.randint(3, 60) for _ in range(40)]
    records = [
        TrainingRecord(
            text=f"t{n}", instruction="i", output=f"o{n}", group=rng.choice([None, "x", "y", "z"]), source=f"set:{n}"
        )
        for n in range(23)
    ]
    return groups, lengths, items, item_lengths, records
