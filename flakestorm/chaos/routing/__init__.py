"""HTTP-level faults in process (SPEC §10): a python agent's HTTP clients routed through the run's
chaos proxy for the URLs of ``proxy.tools``, so a tool's own client meets the 503, the timeout
or the poisoned body, and the tool's own error handling runs, as for an http agent.

- :mod:`.router`: :class:`~.router.Router`, which URL is a tool's and where it goes instead
  (``<proxy>/tools/NAME/...``), with the attribution headers of the invocation in progress;
- :mod:`.clients`: one registered unit per HTTP client library, each installed through the
  library's own extension point and put back after the run; :class:`~.clients.Routing`, the
  run's routing (enter, leave).

Only the URLs of ``proxy.tools`` are routed: an LLM SDK's calls keep the SDK-level path
(``agent.llm``), and every other request goes where it went.
"""

from flakestorm.chaos.routing.clients import CLIENTS, Routing
from flakestorm.chaos.routing.router import Router

__all__ = ["CLIENTS", "Router", "Routing"]
