"""The two-tower recipe's import path before issue 68 (names round 2): the recipe is
training/two_tower/ (the LLM side of a two-tower model is its query LLM; "tower" names only the
arrangement). Kept so code written against the old path runs; the package uses the new one."""
