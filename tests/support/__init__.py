"""Test support shared by the test modules (test modules never import each other):

- :mod:`support.server`: a loopback HTTP server (port 0) with a ``Request -> Response`` handler;
- :mod:`support.raw_server`: a raw-bytes upstream, for what a well-behaved server never sends;
- :mod:`support.fake_github`: a fake GitHub REST API (issue comments);
- :mod:`support.fake_provider`: a fake OpenAI + Anthropic API;
- :mod:`support.proxy_rig`: the weather tool, tool-fault scenarios and calls through the proxy;
- :mod:`support.llm_shapes`: the mock LLM's four API shapes, read whole or streamed;
- :mod:`support.stream_formats_agent`: agents relaying their LLM's stream as Anthropic events
  or generic SSE;
- :mod:`support.config_text`: config text loaded, or its problems as printed;
- :mod:`support.quote_project`: a python-agent project with a wrapped tool, run in-process.

Fixtures shared by the test modules are in ``tests/conftest.py``.
"""
