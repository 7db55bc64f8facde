"""`python -m instemb_rag.cli ...` (what torchrun and the tests' server processes launch): the
console script's entry (entry.py: a warm query answered without typer, the rest by the typer app)."""

import sys

from .entry import main

sys.exit(main())
