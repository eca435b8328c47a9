"""The HTTP client libraries a python agent's tools use, each routed through the chaos proxy for
a run by the library's own extension point (one small registered unit per library):

==========  ==================================================================================
library     how its requests to a tool's URL are routed
==========  ==================================================================================
requests    the transport adapter every session sends through (``HTTPAdapter.send``): the
            request is sent to the proxy instead (no environment proxy on the way); the
            response keeps the URL and the request the agent sent
httpx       the default transports, sync and async (``HTTPTransport.handle_request``,
            ``AsyncHTTPTransport.handle_async_request``): the request is sent to the proxy
            instead; the client keeps the request it built. The same for httpx2 (the
            official ``mcp`` SDK's client), which has httpx's API
urllib      a handler in the opener ``urllib.request.urlopen`` uses (``install_opener``); an
            opener the agent built itself with ``build_opener`` is its own
aiohttp     a client middleware added to every ``ClientSession`` created during the run, which
            sends a tool's request through the proxy as its HTTP proxy (forward mode)
==========  ==================================================================================

A library that is not installed has nothing to route. Clients created before the run are
routed too (the extension points are the library's classes, not an instance's), but
aiohttp's (its middlewares are a session's). Leaving
:class:`Routing` puts every original back. An aiohttp session created before the run keeps
the middlewares it was given: a fault on a tool only it calls is not delivered, never passed.
"""

from __future__ import annotations

import importlib.util
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol

from flakestorm.agents.closing import Closing
from flakestorm.chaos.proxy.reply import UPSTREAM_ERROR_HEADER
from flakestorm.chaos.routing.router import Router, unreachable

Restore = Callable[[], None]


class Client(Protocol):
    """One HTTP client library."""

    @property
    def library(self) -> str: ...

    def install(self, router: Router) -> Restore | None:
        """Route the library's requests with ``router``; how to undo it (None: the library is
        not installed)."""
        ...


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class RequestsClient:
    library = "requests"

    def install(self, router: Router) -> Restore | None:
        if not _installed("requests"):
            return None
        import requests
        from requests.adapters import HTTPAdapter

        original = HTTPAdapter.send

        def send(
            self: HTTPAdapter,
            request: Any,
            stream: bool = False,
            timeout: Any = None,
            verify: Any = True,
            cert: Any = None,
            proxies: Any = None,
        ) -> Any:
            routed = router.route(request.url or "")
            if routed is None:
                return original(self, request, stream, timeout, verify, cert, proxies)
            sent = request.copy()
            sent.url = routed.url
            sent.headers.update(routed.headers)
            response = original(self, sent, stream, timeout, verify, cert, None)
            response.url, response.request = request.url, request
            marker = response.headers.get(UPSTREAM_ERROR_HEADER)
            if (reason := unreachable(response.status_code, marker, response.content)) is not None:
                raise requests.exceptions.ConnectionError(reason, request=request)
            return response

        HTTPAdapter.send = send  # type: ignore[method-assign]

        def restore() -> None:
            HTTPAdapter.send = original  # type: ignore[method-assign]

        return restore


class HttpxClient:
    """httpx, or a library with its API under another name (``httpx2``, which the official
    ``mcp`` SDK's client uses)."""

    def __init__(self, library: str = "httpx") -> None:
        self.library = library

    def install(self, router: Router) -> Restore | None:
        if not _installed(self.library):
            return None
        httpx = importlib.import_module(self.library)

        def rerouted(request: Any) -> Any:
            routed = router.route(str(request.url))
            if routed is None:
                return None
            url = httpx.URL(routed.url)
            headers = [("Host", url.netloc.decode("ascii"))]
            headers += [(k, v) for k, v in request.headers.multi_items() if k.lower() != "host"]
            headers += list(routed.headers.items())
            return httpx.Request(
                request.method,
                url,
                headers=headers,
                stream=request.stream,
                extensions=request.extensions,
            )

        sync, async_ = httpx.HTTPTransport, httpx.AsyncHTTPTransport
        handle, handle_async = sync.handle_request, async_.handle_async_request

        def handle_request(self: Any, request: Any) -> Any:
            sent = rerouted(request)
            if sent is None:
                return handle(self, request)
            response = handle(self, sent)
            if response.status_code == 502 and response.headers.get(UPSTREAM_ERROR_HEADER):
                reason = unreachable(502, response.headers[UPSTREAM_ERROR_HEADER], response.read())
                if reason is not None:
                    raise httpx.ConnectError(reason, request=request)
            return response

        async def handle_async_request(self: Any, request: Any) -> Any:
            sent = rerouted(request)
            if sent is None:
                return await handle_async(self, request)
            response = await handle_async(self, sent)
            if response.status_code == 502 and response.headers.get(UPSTREAM_ERROR_HEADER):
                body = await response.aread()
                reason = unreachable(502, response.headers[UPSTREAM_ERROR_HEADER], body)
                if reason is not None:
                    raise httpx.ConnectError(reason, request=request)
            return response

        sync.handle_request = handle_request
        async_.handle_async_request = handle_async_request

        def restore() -> None:
            sync.handle_request = handle
            async_.handle_async_request = handle_async

        return restore


class _RoutingHandler(urllib.request.BaseHandler):
    """Sends a tool's request to the proxy (before the HTTP handlers set its ``Host``)."""

    handler_order = 100

    def __init__(self, router: Router) -> None:
        self.router = router

    def http_request(self, request: urllib.request.Request) -> urllib.request.Request:
        routed = self.router.route(request.full_url)
        if routed is not None:
            request.full_url = routed.url
            request.remove_header("Host")
            for name, value in routed.headers.items():
                request.add_unredirected_header(name, value)
        return request

    https_request = http_request

    def http_response(self, request: urllib.request.Request, response: Any) -> Any:
        """An unreachable upstream as urlopen's own connection error (a ``URLError``)."""
        marker = response.headers.get(UPSTREAM_ERROR_HEADER)
        if response.status == 502 and marker:
            reason = unreachable(502, marker, response.read())
            if reason is not None:
                response.close()
                raise urllib.error.URLError(ConnectionRefusedError(reason))
        return response

    https_response = http_response


class UrllibClient:
    library = "urllib"

    def install(self, router: Router) -> Restore | None:
        # the opener installed before the run (None: urlopen builds its default one again)
        previous: urllib.request.OpenerDirector | None = getattr(urllib.request, "_opener", None)
        urllib.request.install_opener(urllib.request.build_opener(_RoutingHandler(router)))

        def restore() -> None:
            urllib.request.install_opener(previous)

        return restore


class AiohttpClient:
    """aiohttp: a client middleware (aiohttp's own extension point for a session's requests) on
    every session created during the run, which sends a tool's request through the proxy as
    its HTTP proxy (``ClientRequest.update_proxy``): the proxy takes it in forward mode, by its
    URL under ``proxy.tools``. A session created before the run keeps the middlewares it was
    given."""

    library = "aiohttp"

    def install(self, router: Router) -> Restore | None:
        if not _installed("aiohttp"):
            return None
        import aiohttp
        from yarl import URL

        proxy = URL(router.proxy_url)

        async def middleware(request: Any, handler: Any) -> Any:
            routed = router.route(str(request.url))
            if routed is None:
                return await handler(request)
            request.update_proxy(proxy, None, None)
            for name, value in routed.headers.items():
                request.headers[name] = value
            response = await handler(request)
            marker = response.headers.get(UPSTREAM_ERROR_HEADER)
            if response.status == 502 and marker:
                reason = unreachable(502, marker, await response.read())
                if reason is not None:
                    response.release()
                    raise aiohttp.ClientConnectorError(
                        request.connection_key, ConnectionRefusedError(111, reason)
                    )
            return response

        session = aiohttp.ClientSession
        original = session.__init__

        def init(self: Any, *args: Any, middlewares: Any = (), **kwargs: Any) -> None:
            original(self, *args, middlewares=(*middlewares, middleware), **kwargs)

        session.__init__ = init  # type: ignore[method-assign]

        def restore() -> None:
            session.__init__ = original  # type: ignore[method-assign]

        return restore


CLIENTS: tuple[Client, ...] = (
    RequestsClient(),
    HttpxClient(),
    HttpxClient("httpx2"),
    UrllibClient(),
    AiohttpClient(),
)
"""The client libraries routed in process."""


class Routing(Closing):
    """Routes the process's HTTP clients with ``router`` while entered (module doc)."""

    def __init__(self, router: Router, clients: tuple[Client, ...] = CLIENTS) -> None:
        self.router = router
        self._clients = clients
        self._restores: list[Restore] = []
        self.libraries: tuple[str, ...] = ()
        """The libraries routed (those installed)."""

    def __enter__(self) -> Routing:
        routed = []
        try:
            for client in self._clients:
                restore = client.install(self.router)
                if restore is not None:
                    self._restores.append(restore)
                    routed.append(client.library)
        except BaseException:
            self.close()
            raise
        self.libraries = tuple(routed)
        return self

    def close(self) -> None:
        """Put the libraries' own clients back."""
        while self._restores:
            self._restores.pop()()
