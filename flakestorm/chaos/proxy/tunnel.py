"""``CONNECT host:port`` (``HTTPS_PROXY`` traffic): a TLS tunnel, relayed byte for byte.

The proxy cannot see inside TLS, so a tunnel is a call of a tool when a tool fault's
``match_url`` matches ``host:port``, ``host`` or ``https://host[:port]/`` (e.g.
``match_url: "api.example.com*"``), or when ``tools[NAME]`` is an ``https://`` URL on that host
and port; else other traffic. A fault that fires on it acts on the tunnel: ``error`` refuses the
CONNECT with its ``error_code`` (default 503), ``slow`` delays it and then tunnels, ``timeout``
holds it for ``delay_ms`` and closes without answering, ``malformed`` and
``malicious_response`` (which cannot forge a body inside TLS) establish the tunnel and then
reset it.

A tool-result attack that matches a tunnel cannot read, let alone poison, the result inside
it: the call is logged with the attack in ``unapplied`` (:func:`unreadable`), so an attack
that met tunnels is not delivered and says how to route the tool instead (SPEC §10). A tool
fault that answers in place of the tool (``error``, ``timeout``...) leaves the attack nothing
to poison anyway: the book lists it in ``replaced``.
"""

from __future__ import annotations

import select
import socket
import time
from urllib.parse import urlsplit

from flakestorm.chaos.faults.decisions import (
    TOOL_RESULT_ATTACKS,
    Decision,
    FaultBook,
    Target,
    tool_matches,
)
from flakestorm.chaos.faults.labels import attack_label, tool_fault_label
from flakestorm.chaos.faults.tool_modes import RELAY, TOOL_MODES, TunnelAction
from flakestorm.chaos.proxy.call import ServedCall
from flakestorm.chaos.proxy.framing import CHUNK_BYTES, FramedHandler, reset
from flakestorm.chaos.proxy.reply import UpstreamFailure, error_reply
from flakestorm.chaos.proxy.routes import attribute
from flakestorm.config import ToolFault


class Tunnel:
    """``CONNECT host:port``: decide, then relay bytes both ways until either side closes."""

    def __init__(self, handler: FramedHandler) -> None:
        self.handler = handler
        self.proxy = handler.proxy

    def serve(self) -> None:
        handler, proxy = self.handler, self.proxy
        handler.close_connection = True  # whatever happens, this connection ends with the tunnel
        started = time.perf_counter()
        seq = proxy.log.next_seq()
        host, port = _split_authority(handler.path)
        if host is None:
            message = f"CONNECT needs host:port, got {handler.path!r}"
            handler.write(error_reply(400, "bad_request", message), head=False)
            return
        tool, url = self._target(host, port)
        target = Target.TOOL if tool else Target.OTHER
        call = ServedCall(target, "CONNECT", f"{host}:{port}", "", "", tool=tool)
        call.begin(proxy.log, seq, started)
        try:
            self._serve(call, host, port, url)
        finally:
            call.done(call.status)

    def _serve(self, call: ServedCall, host: str, port: int, url: str) -> None:
        handler, proxy = self.handler, self.proxy
        book = attribute(call, proxy, handler.headers)
        fault: ToolFault | None = None
        if book is not None and call.tool is not None:
            decision = book.tool_call(call.tool, url, call.cell)
            call.decided(decision)
            for label in _result_attacks(book, decision):
                call.not_applied(label, unreadable(host, port, call.tool))
            if decision.tool_fault is not None:
                index, fault = decision.tool_fault
                call.fired.append(tool_fault_label(index, fault))
        tunnel = TOOL_MODES[fault.mode].tunnel(fault) if fault is not None else RELAY
        if fault is not None and tunnel.action is TunnelAction.REFUSE:
            message = fault.message or f"tunnel to {host}:{port} refused"
            call.done(fault.error_code)
            handler.write(error_reply(fault.error_code, "tunnel_refused", message), head=False)
            return
        if tunnel.action is TunnelAction.DROP:
            handler.hold(tunnel.delay_ms)
            call.done(None)
            reset(handler.connection)
            return
        if tunnel.action is TunnelAction.DELAY and not handler.hold(tunnel.delay_ms):
            return
        upstream = self._connect(call, host, port)
        if isinstance(upstream, UpstreamFailure):
            call.upstream_error = upstream.summary
            call.done(upstream.status)
            handler.write(upstream.reply, head=False)
            return
        with upstream:
            upstream.settimeout(None)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            call.done(200)
            handler.send(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            if tunnel.action is TunnelAction.RESET:
                # a body cannot be forged inside TLS: the closest is a reset once established
                reset(handler.connection)
                return
            self._relay(upstream)

    def _connect(self, call: ServedCall, host: str, port: int) -> socket.socket | UpstreamFailure:
        """The connection to ``host:port``, or why there is none."""
        proxy, tool = self.proxy, call.tool
        if tool is not None and tool in proxy.matches:
            return UpstreamFailure(502, "cannot_redirect", unredirectable(tool, proxy.tools[tool]))
        try:
            return socket.create_connection((host, port), timeout=proxy.connect_timeout_s)
        except TimeoutError:
            return UpstreamFailure(504, "upstream_timeout", f"{host}:{port} did not accept")
        except OSError as exc:
            return UpstreamFailure(
                502, "upstream_unreachable", f"{host}:{port} is unreachable: {exc.strerror}"
            )

    def _target(self, host: str, port: int) -> tuple[str | None, str]:
        """The tool a tunnel to host:port is a call of (see the module doc), and its URL."""
        https = f"https://{host}" if port == 443 else f"https://{host}:{port}"
        candidates = (f"{host}:{port}", host, https + "/", https)
        for scenario in self.proxy.active_scenarios():
            for fault in scenario.tool_faults:
                if fault.match_url:
                    for candidate in candidates:
                        if tool_matches(fault, None, candidate):
                            return fault.tool, candidate
        for name, base in self.proxy.tools.items():
            parts = urlsplit(self.proxy.matches.get(name, base))
            if parts.scheme == "https" and parts.hostname == host and (parts.port or 443) == port:
                return name, https + "/"
        return None, https + "/"

    def _relay(self, upstream: socket.socket) -> None:
        client = self.handler.connection
        # bytes the client sent right behind the CONNECT may sit in the connection's buffer
        pending = self.handler.wire.buffer
        if pending:
            upstream.sendall(bytes(pending))
            pending.clear()
        peers = {client: upstream, upstream: client}
        open_ = [client, upstream]
        while open_ and not self.proxy.stopping:
            readable, _, _ = select.select(open_, [], [], 0.5)
            for sock in readable:
                try:
                    data = sock.recv(CHUNK_BYTES)
                except OSError:
                    return
                if not data:
                    open_.remove(sock)
                    try:
                        peers[sock].shutdown(socket.SHUT_WR)
                    except OSError:
                        return
                    continue
                try:
                    peers[sock].sendall(data)
                except OSError:
                    return


def unredirectable(tool: str, forward: str) -> str:
    """Why a tunnel to a ``{match, forward}`` route's https ``match`` cannot go to ``forward``."""
    return (
        f"tool {tool}'s route sends its calls to {forward}, but this one came as an HTTPS "
        "tunnel, which the proxy can neither read nor redirect: point the agent's base URL for "
        f"it at the proxy's /tools/{tool} route (or run the agent as type: python, whose "
        "clients flakestorm routes before TLS)"
    )


def _result_attacks(book: FaultBook, decision: Decision) -> list[str]:
    """The labels of the tool-result attacks that matched a tunnel and could act on its result
    (were it readable)."""
    return [
        label
        for i, attack in enumerate(book.scenario.context_attacks)
        if attack.type in TOOL_RESULT_ATTACKS
        and (label := attack_label(i, attack)) in decision.matched
    ]


def unreadable(host: str, port: int, tool: str) -> str:
    """Why a tool-result attack could not be applied to a tunnel to ``host:port`` (a call of
    ``tool``), and how to route the tool so that it can."""
    authority = f"[{host}]" if ":" in host else host
    origin = f"https://{authority}" if port == 443 else f"https://{authority}:{port}"
    name = "<name>" if tool == "*" else tool
    return (
        f"the call to {authority}:{port} went through an HTTPS tunnel, whose results flakestorm "
        f"cannot read: point the agent's base URL for that tool at the proxy's /tools/{name} "
        f"route, with proxy.tools.{name}: {origin}, so the proxy makes the HTTPS call and "
        "sees the result"
    )


def _split_authority(authority: str) -> tuple[str | None, int]:
    host, sep, port_text = authority.rpartition(":")
    if not sep or not port_text.isdigit() or not host:
        return None, 0
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    port = int(port_text)
    return (host, port) if 0 < port < 65536 else (None, 0)
