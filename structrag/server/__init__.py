"""``structrag serve``: one process owns an index and serves it over HTTP and MCP.

:mod:`~structrag.server.service` keeps the index open and warm (one writer thread, a pool
of readers that see committed state only, background ingest jobs);
:mod:`~structrag.server.app` is the HTTP API (FastAPI, under ``/v1``), the web explorer
and the MCP endpoint; :mod:`~structrag.server.mcp_tools` the MCP tools and resources;
:mod:`~structrag.server.auth` tokens and their scopes; :mod:`~structrag.server.run`
starts and stops it. :mod:`~structrag.server.discovery` (standard library only) is how
the CLI finds a running server. Importing this package imports none of them.
"""
