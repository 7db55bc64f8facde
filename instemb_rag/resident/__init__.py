"""The resident query process: `instemb-rag query` answers through a local process that keeps
the encoders and the indexes open, the way a local model runner does.

    endpoint.py   where it listens (a Unix socket under $INSTEMB_HOME, user-only), its record
                  (endpoint.json), and the checks of both; stdlib only
    client.py     the CLI's side: find it, start it, ask it, stop it (http.client; no torch)
    app.py        the process: the server's /v1/search code over a state per index (serve/)
    __main__.py   what the client starts: `python -m instemb_rag.resident`
    warm.py       after `instemb-rag index`: the process started in the background and asked
                  once, so the first query finds the index and its model loaded

The client side imports no torch, transformers or faiss: a query through a running process
costs the client's own start only. The process never writes an index: it opens catalogs read-only
and reopens an index whose folder changed (manifest or catalog replaced) before answering.
"""
