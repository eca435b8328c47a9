"""LLM faults as the OpenAI and Anthropic SDKs raise them (SPEC §10), when ``agent.llm`` names an
SDK method (``openai.resources.chat.completions:Completions.create``, its ``Async…`` twin,
``anthropic.resources.messages:Messages.create``, ``….stream``, …).

The wrapped method's first argument is the SDK's resource object, whose ``_client`` is the SDK
client that made the call. :func:`sdk_of` recognises it (by its package's name: nothing is
imported), and :meth:`Sdk.error` turns a fault's python error into the exception the SDK itself
raises for the reply the chaos proxy would have sent:

- ``rate_limit``: the proxy's 429 (the provider's error JSON, ``Retry-After``, the rate-limit
  headers) as a real HTTP response of the SDK's HTTP library, read by the client's own
  ``_make_status_error_from_response`` (as the SDK reads a failed response):
  ``openai.RateLimitError`` / ``anthropic.RateLimitError``, with
  ``.response.headers["retry-after"]``;
- ``timeout``: after the wait, ``openai.APITimeoutError`` / ``anthropic.APITimeoutError`` on
  the request the call would have sent;
- any status error (an ``error_code``): the client's own class for it (5xx:
  ``InternalServerError``).

The SDK client's own retry loop sits below the wrapped method, so it does not run: the agent
sees the error its SDK raises once its retries are spent, and its own retry and backoff code
(the framework's) handles it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from flakestorm.chaos.llm.modes import LLM_MODES
from flakestorm.chaos.llm.protocol import Provider
from flakestorm.config import LlmFault
from flakestorm.errors import ToolFaultError

__all__ = ["Sdk", "sdk_of"]

_PROVIDERS = {"openai": Provider.OPENAI, "anthropic": Provider.ANTHROPIC}

_PATHS = {
    Provider.OPENAI: "chat/completions",
    Provider.ANTHROPIC: "v1/messages",
}
"""Where a call goes when its resource does not say (the URL of the request an error carries)."""


@dataclass(frozen=True)
class Sdk:
    """The SDK behind one wrapped call: its package, its client and the client's HTTP library."""

    provider: Provider
    package: ModuleType
    client: Any
    http: ModuleType
    path: str

    def request(self) -> Any:
        """The request the call would have sent (``POST`` to the client's base URL)."""
        base = str(getattr(self.client, "base_url", "http://localhost/")).rstrip("/")
        return self.http.Request("POST", f"{base}/{self.path}")

    def error(self, fault: LlmFault, error: BaseException) -> BaseException:
        """The SDK's own exception for ``fault``, whose python plan raises ``error``."""
        if isinstance(error, TimeoutError):
            timeout_error = getattr(self.package, "APITimeoutError", None)
            return timeout_error(request=self.request()) if timeout_error else error
        unit = LLM_MODES[fault.mode]
        if unit.replaces_upstream:  # the HTTP reply the proxy sends instead
            sent = unit.before_upstream(fault, self.provider, False)
            if sent is None:
                return error
            status, headers, body = sent.status, list(sent.headers), sent.body or b""
        elif isinstance(error, ToolFaultError):
            status, headers, body = error.error_code, [], b""
        else:
            return error
        response = self.http.Response(status, headers=headers, content=body, request=self.request())
        from_response = getattr(self.client, "_make_status_error_from_response", None)
        if callable(from_response):  # the SDK's own reading of an error response
            made: BaseException = from_response(response)
            return made
        try:
            parsed: Any = response.json()
        except ValueError:
            parsed = None
        message = _message(parsed)
        text = f"Error code: {status}" + (f" - {message}" if message else "")
        made = self.client._make_status_error(text, body=parsed, response=response)
        return made


def _message(body: Any) -> str | None:
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) else None


def _root(value: object) -> str:
    return type(value).__module__.partition(".")[0]


def _http_library(http_client: object, sdk: str) -> ModuleType | None:
    """The HTTP library the SDK's HTTP client is built on (httpx, or its successor)."""
    for klass in type(http_client).__mro__:
        module = sys.modules.get(klass.__module__.partition(".")[0])
        known = module is not None and module.__name__ not in (sdk, "builtins")
        if known and all(hasattr(module, n) for n in ("Request", "Response", "SyncByteStream")):
            return module
    return None


def sdk_of(args: tuple[Any, ...]) -> Sdk | None:
    """The SDK whose method is being called with ``args`` (``args[0]`` its resource), or None
    when it is not an OpenAI or Anthropic SDK method."""
    if not args:
        return None
    resource = args[0]
    client = getattr(resource, "_client", None)
    provider = _PROVIDERS.get(_root(client)) if client is not None else None
    if provider is None or not callable(getattr(client, "_make_status_error", None)):
        return None
    package = sys.modules.get(_root(client))
    http = _http_library(getattr(client, "_client", None), _root(client))
    if http is None or package is None:
        return None
    path = _PATHS[provider]
    module = type(resource).__module__
    if ".responses" in module:
        path = "responses"
    elif provider is Provider.OPENAI and ".chat." not in module and "completions" in module:
        path = "completions"
    return Sdk(provider, package, client, http, path)
