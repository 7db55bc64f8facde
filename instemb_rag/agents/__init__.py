"""Search for agents: an index served as tools over the Model Context Protocol (mcp_server.py,
`instemb-rag mcp`). Queries go through the resident query process (instemb_rag/resident/)."""
