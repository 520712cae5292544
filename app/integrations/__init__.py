"""Runtime integrations: the MCP server (``ctxgate mcp``, and ``/mcp`` on the server) and the
Claude Code hook (``ctxgate hook claude-code``).

A shell layer over ``ctxgate_client``: every call goes through the HTTP API, so its
authentication, guards and scope apply unchanged — the integrations are never a side door.
"""
