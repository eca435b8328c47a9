"""A fake GitHub REST API (the issue comments part) on a loopback port, for tests.

::

    with FakeGitHub(tokens={"rw": "write", "ro": "read"}) as api:
        api.add_comments("o/r", 7, ["first", "second"])
        ...  # point GITHUB_API_URL at api.url
        assert api.comments("o/r", 7)[-1]["body"] == "..."

It serves what the action uses, like GitHub does:

- ``GET /repos/{owner}/{repo}/issues/{number}/comments?per_page=N&page=P``, paginated with a
  ``Link`` header (``rel="next"``, ``rel="last"``…);
- ``POST /repos/{owner}/{repo}/issues/{number}/comments`` (201);
- ``PATCH /repos/{owner}/{repo}/issues/comments/{id}`` (200);
- ``Authorization: Bearer TOKEN`` checked against ``tokens``: an unknown token is 401, a
  ``read`` token gets 403 ("Resource not accessible by integration") on writes;
- an optional path ``prefix`` (``/api/v3``, as on GitHub Enterprise Server).

Every request is recorded (``api.requests``). For tests that run it out of process (the Docker
end-to-end test runs it as a container), ``GET /_fake/requests`` and ``GET /_fake/comments``
return the same as JSON, and it runs as a script::

    python tests/support/fake_github.py --port 0 --token rw:write --token ro:read

printing ``listening on http://HOST:PORT`` (the port) as its first line. It uses the standard
library only, so the file can be copied into any Python image.

Like ``support.server``, Nagle is off and each response leaves in one buffered write.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["FakeGitHub", "Recorded"]

_LIST = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")
_ONE = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$")


@dataclass(frozen=True)
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    """Path and query, without the prefix."""
    headers: Mapping[str, str]
    body: Any
    status: int
    """What the fake answered."""


class FakeGitHub:
    """The fake API; a context manager serving on ``host``:``port`` (0 = a free port)."""

    def __init__(
        self,
        tokens: Mapping[str, str] | None = None,
        prefix: str = "",
        host: str = "127.0.0.1",
        port: int = 0,
        public_url: str | None = None,
    ) -> None:
        self.tokens = dict(tokens if tokens is not None else {"token": "write"})
        """token -> ``write`` or ``read``."""
        self.prefix = prefix.rstrip("/")
        self.public_url = public_url
        """The base URL for ``Link`` headers (default: from the request's ``Host``)."""
        self.fail_next: list[int] = []
        """Statuses to answer the next requests with, whatever they are (5xx tests)."""
        self._comments: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._requests: list[Recorded] = []
        self._next_id = 1000
        self._lock = threading.Lock()
        self._httpd = _Server((host, port), _make_handler(self))
        self._thread: threading.Thread | None = None

    # -- lifecycle

    def start(self) -> FakeGitHub:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """What ``GITHUB_API_URL`` should be."""
        host = str(self._httpd.server_address[0])
        return f"http://{host}:{self.port}{self.prefix}"

    # -- state

    def add_comments(
        self, repo: str, number: int, bodies: list[str], user: str = "someone"
    ) -> None:
        with self._lock:
            for body in bodies:
                self._add(repo, number, body, user)

    def _add(self, repo: str, number: int, body: str, user: str) -> dict[str, Any]:
        self._next_id += 1
        comment = {
            "id": self._next_id,
            "body": body,
            "user": {"login": user, "type": "Bot" if user.endswith("[bot]") else "User"},
            "html_url": f"https://github.example/{repo}/pull/{number}#issuecomment-{self._next_id}",
        }
        self._comments.setdefault((repo, number), []).append(comment)
        return comment

    def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(c) for c in self._comments.get((repo, number), [])]

    @property
    def requests(self) -> list[Recorded]:
        with self._lock:
            return list(self._requests)

    # -- the API

    def handle(
        self, method: str, path: str, headers: Mapping[str, str], raw: bytes, base: str
    ) -> tuple[int, Any, dict[str, str]]:
        """Answer one request: (status, JSON body, extra headers)."""
        if path.startswith("/_fake/"):
            return self._introspect(path)
        if self.prefix:
            if not path.startswith(self.prefix + "/"):
                return 404, {"message": "Not Found"}, {}
            path = path[len(self.prefix) :]
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            return 400, {"message": "Problems parsing JSON"}, {}
        status, reply, extra = self._answer(method, path, headers, body, base)
        with self._lock:
            self._requests.append(Recorded(method, path, dict(headers), body, status))
        return status, reply, extra

    def _answer(
        self, method: str, path: str, headers: Mapping[str, str], body: Any, base: str
    ) -> tuple[int, Any, dict[str, str]]:
        with self._lock:
            if self.fail_next:
                return self.fail_next.pop(0), {"message": "Server Error"}, {}
        auth = headers.get("Authorization", "")
        token = auth[len("Bearer ") :] if auth.startswith("Bearer ") else ""
        scope = self.tokens.get(token)
        if scope is None:
            return 401, {"message": "Bad credentials"}, {}
        split = urlsplit(path)
        query = parse_qs(split.query)
        listing = _LIST.match(split.path)
        single = _ONE.match(split.path)
        if method != "GET" and scope != "write":
            return 403, {"message": "Resource not accessible by integration"}, {}
        if listing and method == "GET":
            return self._list(listing[1], int(listing[2]), query, base)
        if listing and method == "POST":
            if not isinstance(body, dict) or not isinstance(body.get("body"), str):
                return 422, {"message": "Validation Failed"}, {}
            if len(body["body"]) > 65_536:
                return 422, {"message": "Body is too long (maximum is 65536 characters)"}, {}
            with self._lock:
                comment = self._add(
                    listing[1], int(listing[2]), body["body"], "github-actions[bot]"
                )
            return 201, comment, {}
        if single and method == "PATCH":
            if not isinstance(body, dict) or not isinstance(body.get("body"), str):
                return 422, {"message": "Validation Failed"}, {}
            with self._lock:
                for (repo, _), items in self._comments.items():
                    for comment in items:
                        if repo == single[1] and comment["id"] == int(single[2]):
                            comment["body"] = body["body"]
                            return 200, dict(comment), {}
            return 404, {"message": "Not Found"}, {}
        return 404, {"message": "Not Found"}, {}

    def _list(
        self, repo: str, number: int, query: Mapping[str, list[str]], base: str
    ) -> tuple[int, Any, dict[str, str]]:
        per_page = min(int(query.get("per_page", ["30"])[0]), 100)
        page = int(query.get("page", ["1"])[0])
        with self._lock:
            items = [dict(c) for c in self._comments.get((repo, number), [])]
        pages = max((len(items) + per_page - 1) // per_page, 1)
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []
        root = f"{self.public_url or base}{self.prefix}/repos/{repo}/issues/{number}/comments"

        def link(p: int, rel: str) -> str:
            return f'<{root}?per_page={per_page}&page={p}>; rel="{rel}"'

        if page < pages:
            links += [link(page + 1, "next"), link(pages, "last")]
        if page > 1:
            links += [link(1, "first"), link(page - 1, "prev")]
        return 200, chunk, {"Link": ", ".join(links)} if links else {}

    def _introspect(self, path: str) -> tuple[int, Any, dict[str, str]]:
        if path == "/_fake/requests":
            return 200, [r.__dict__ for r in self.requests], {}
        if path == "/_fake/comments":
            with self._lock:
                return (
                    200,
                    [
                        {"repo": repo, "number": n, **c}
                        for (repo, n), items in self._comments.items()
                        for c in items
                    ],
                    {},
                )
        return 404, {"message": "Not Found"}, {}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


def _make_handler(api: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        wbufsize = -1  # buffered: status line, headers and body leave in one write

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            base = f"http://{self.headers.get('Host', 'localhost')}"
            headers = {k: v for k, v in self.headers.items()}
            status, reply, extra = api.handle(self.command, self.path, headers, raw, base)
            data = json.dumps(reply).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    return _Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A fake GitHub REST API (issue comments).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--prefix", default="", help="path prefix, e.g. /api/v3")
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="TOKEN[:read|write]",
        help="an accepted token (default scope: write); repeatable",
    )
    args = parser.parse_args(argv)
    tokens = {}
    for spec in args.token or ["token:write"]:
        token, _, scope = spec.partition(":")
        tokens[token] = scope or "write"
    api = FakeGitHub(tokens, args.prefix, args.host, args.port)
    print(f"listening on http://{args.host}:{api.port}{api.prefix}", flush=True)
    try:
        api._httpd.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        api._httpd.server_close()


if __name__ == "__main__":
    main()
