"""The two-tower query tower recipe (issue 44): InstEmb queries trained into a sentence encoder's
document space, against its cached document vectors (objective.py; the vectors: ../cached_vectors.py)."""
