"""The instruction-effect query side (issue 56), trained on cached vectors.

vectors.py    every vector the query side trains on, cached on disk by what made it
data.py       the cached vectors as tensors, with each query's candidates
objective.py  the effect map h and the strength per query, InfoNCE on the combined score
"""
