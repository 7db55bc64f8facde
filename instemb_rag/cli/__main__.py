"""`python -m instemb_rag.cli ...` (what torchrun and the tests' server processes launch)."""

from . import app

app()
