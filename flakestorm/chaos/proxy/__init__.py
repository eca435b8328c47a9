"""The chaos proxy: faults injected into an HTTP agent's LLM and tool traffic (SPEC §4.2).

One threaded HTTP/1.1 server. Routes (the data routes never use the ``/_flakestorm/`` prefix)::

    /llm/openai/v1/...       -> llm_upstream + /v1/...   (default https://api.openai.com)
    /llm/anthropic/v1/...    -> llm_upstream + /v1/...   (default https://api.anthropic.com)
    /tools/NAME/REST?QUERY   -> tools[NAME] + /REST?QUERY (unknown NAME: 404 naming the tools)
    /mcp/NAME/REST?QUERY     -> mcp[NAME] + /REST?QUERY   (an MCP server, streamable HTTP)
    GET http://host/path     forward-proxy mode (HTTP_PROXY): forwarded to that URL
    CONNECT host:port        HTTPS tunnel (HTTPS_PROXY): bytes relayed as they are
    /_flakestorm/...         the control API

``llm_upstream`` is a URL, ``mock`` (the built-in deterministic LLM, no network) or
``cassette:PATH`` (replay). Upstream failures are not faults: an unreachable upstream gets 502,
a timed-out one 504, both as ``{"error": {"type": "upstream_unreachable" | "upstream_timeout",
"message": ...}}`` and recorded in the interaction's ``upstream_error`` (never in ``fired``).
The proxy's own errors are JSON too (``bad_request``, ``request_too_large``, ``unknown_tool``,
``not_found``...).

Modules (import the entry points from them; this package imports none, so the runner's
control client does not load the server):

- ``server``: :class:`~.server.ChaosProxy` (lifecycle, active scenario, dispatch);
- ``framing``: HTTP/1.1 framing, the threaded server, hop-by-hop headers;
- ``routes``: which call a request is, and its cell (attribution, stragglers);
- ``injection``: a data call served with its faults;
- ``mcp_calls``: a request to an MCP server, read and faulted with :mod:`flakestorm.chaos.mcp`;
- ``headers``: header blocks on the proxy's threads, read without the ``email`` feed parser;
- ``stdio_relay``: ``flakestorm mcp-stdio``, a stdio MCP server's requests sent through the
  proxy; ``relays``: the proxy's half, requests handed back to the relay that polls for them;
- ``tunnel``: ``CONNECT`` tunnels;
- ``control``: the control API, the proxy's end (:func:`~.control.answer`) and the runner's
  (:class:`~.control.ProxyControl`);
- ``serving``: the proxy as a service (``proxy_from_env``, ``serve_from_env``,
  ``health_check``, ``python -m flakestorm.chaos.proxy``);
- ``upstreams``: where calls go: the network, the mock LLM, a cassette;
- ``call``, ``reply``: a call being served and what goes back.
"""
