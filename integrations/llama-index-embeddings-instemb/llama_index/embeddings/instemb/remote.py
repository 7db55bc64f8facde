"""RemoteEncoder lives in instemb_rag (instemb_rag/client/remote.py: an HTTP client of `instemb-rag
serve` implementing the core Encoder protocol); this module is that module, under the name the
integration has always had (``from llama_index.embeddings.instemb import remote``)."""

import sys

from instemb_rag.client import remote

sys.modules[__name__] = remote
