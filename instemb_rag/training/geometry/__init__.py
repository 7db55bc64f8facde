"""The geometry recipe: a sentence encoder's embedding space into the student's, over cached prefixes.

objective.py  GeometryObjective: the items, the teacher's embeddings, the head, one step
terms.py      the weighted terms of one step, the head's ridge start, the student's embeddings
anchor.py     the starting LLM's similarity rows, held by the anchor term
contrast.py   instruction-contrast records ranked on the embedding that ships
"""
