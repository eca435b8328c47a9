"""A fake GitHub REST API (issue comments, workflow runs and artifacts) on a loopback port.

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
- ``GET /repos/{owner}/{repo}/actions/workflows/{file or id}/runs?branch=B&status=success``
  (newest first), ``GET /repos/{owner}/{repo}/actions/runs/{id}``,
  ``GET /repos/{owner}/{repo}/actions/runs/{id}/artifacts?name=N`` and
  ``GET /repos/{owner}/{repo}/actions/artifacts/{id}/zip``, which answers 302 to
  ``/_blobs/{id}`` (no token needed there, as on GitHub's storage host), serving the zip;
  runs are added with :meth:`FakeGitHub.add_run` (or ``POST /_fake/runs``, same fields);
- ``Authorization: Bearer TOKEN`` checked against ``tokens``: an unknown token is 401, a
  ``read`` token gets 403 ("Resource not accessible by integration") on writes, and a scope
  with ``+noactions`` (``write+noactions``: a job without ``actions: read``) 403 on
  ``/actions/``;
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
import io
import json
import re
import threading
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["FakeGitHub", "Recorded"]

_LIST = re.compile(r"^/repos/([^/]+/[^/]+)/issues/(\d+)/comments$")
_ONE = re.compile(r"^/repos/([^/]+/[^/]+)/issues/comments/(\d+)$")
_RUNS = re.compile(r"^/repos/([^/]+/[^/]+)/actions/workflows/([^/]+)/runs$")
_RUN = re.compile(r"^/repos/([^/]+/[^/]+)/actions/runs/(\d+)$")
_RUN_ARTIFACTS = re.compile(r"^/repos/([^/]+/[^/]+)/actions/runs/(\d+)/artifacts$")
_ZIP = re.compile(r"^/repos/([^/]+/[^/]+)/actions/artifacts/(\d+)/zip$")
_BLOB = re.compile(r"^/_blobs/(\d+)$")
WORKFLOW_IDS = 161335
"""Workflow ids are this plus the workflow's position in the order they were first seen."""


def zip_of(files: Mapping[str, str | bytes]) -> bytes:
    """A zip archive holding ``files`` (path -> content), as upload-artifact makes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


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
        self._runs: list[dict[str, Any]] = []
        self._workflows: list[str] = []
        self._artifacts: dict[int, dict[str, Any]] = {}
        self._blobs: dict[int, bytes] = {}
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

    def add_run(
        self,
        repo: str,
        workflow: str,
        branch: str,
        head_sha: str,
        *,
        created_at: str = "2026-01-01T00:00:00Z",
        event: str = "push",
        conclusion: str = "success",
        head_repo: str | None = None,
        artifacts: Mapping[str, bytes] | None = None,
        expired: bool = False,
    ) -> int:
        """Add a completed run of ``workflow`` (a file name such as ``ci.yml``) with artifacts
        (name -> zip bytes); returns the run's id."""
        with self._lock:
            if workflow not in self._workflows:
                self._workflows.append(workflow)
            self._next_id += 1
            run_id = self._next_id
            run = {
                "id": run_id,
                "name": workflow,
                "path": f".github/workflows/{workflow}",
                "workflow_id": WORKFLOW_IDS + self._workflows.index(workflow),
                "head_branch": branch,
                "head_sha": head_sha,
                "event": event,
                "status": "completed",
                "conclusion": conclusion,
                "created_at": created_at,
                "run_started_at": created_at,
                "html_url": f"https://github.example/{repo}/actions/runs/{run_id}",
                "repository": {"full_name": repo},
                "head_repository": {"full_name": head_repo or repo},
                "_repo": repo,
            }
            self._runs.append(run)
            for name, data in (artifacts or {}).items():
                self._next_id += 1
                self._artifacts[self._next_id] = {
                    "id": self._next_id,
                    "name": name,
                    "size_in_bytes": len(data),
                    "expired": expired,
                    "created_at": created_at,
                    "workflow_run": {"id": run_id, "head_branch": branch, "head_sha": head_sha},
                    "_repo": repo,
                }
                self._blobs[self._next_id] = data
            return run_id

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
        """Answer one request: (status, JSON body or raw bytes, extra headers)."""
        if path.startswith("/_fake/"):
            return self._introspect(method, path, raw)
        blob = _BLOB.match(urlsplit(path).path)
        if blob and method == "GET":
            with self._lock:
                self._requests.append(Recorded(method, path, dict(headers), None, 200))
                data = self._blobs.get(int(blob[1]))
            if data is None:
                return 404, {"message": "Not Found"}, {}
            return 200, data, {}
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
        flags = scope.split("+")
        if method != "GET" and flags[0] != "write":
            return 403, {"message": "Resource not accessible by integration"}, {}
        if "/actions/" in split.path:
            if "noactions" in flags:
                return 403, {"message": "Resource not accessible by integration"}, {}
            return self._actions(method, split.path, query, base)
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

    def _actions(
        self, method: str, path: str, query: Mapping[str, list[str]], base: str
    ) -> tuple[int, Any, dict[str, str]]:
        if method != "GET":
            return 404, {"message": "Not Found"}, {}

        def public(item: Mapping[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in item.items() if not k.startswith("_")}

        runs, run, artifacts, archive = (r.match(path) for r in (_RUNS, _RUN, _RUN_ARTIFACTS, _ZIP))
        with self._lock:
            if runs:
                repo, workflow = runs[1], unquote(runs[2])
                branch = query.get("branch", [None])[0]
                status = query.get("status", [None])[0]
                found = [
                    public(r)
                    for r in self._runs
                    if r["_repo"] == repo
                    and workflow in (r["name"], str(r["workflow_id"]))
                    and (branch is None or r["head_branch"] == branch)
                    and (status is None or status in (r["status"], r["conclusion"]))
                ]
                if not any(workflow in (r["name"], str(r["workflow_id"])) for r in self._runs):
                    return 404, {"message": "Not Found"}, {}
                found.sort(key=lambda r: (r["created_at"], r["id"]), reverse=True)
                per_page = min(int(query.get("per_page", ["30"])[0]), 100)
                return 200, {"total_count": len(found), "workflow_runs": found[:per_page]}, {}
            if run:
                for r in self._runs:
                    if r["_repo"] == run[1] and r["id"] == int(run[2]):
                        return 200, public(r), {}
                return 404, {"message": "Not Found"}, {}
            if artifacts:
                name = query.get("name", [None])[0]
                listed = [
                    public(a)
                    for a in self._artifacts.values()
                    if a["_repo"] == artifacts[1]
                    and a["workflow_run"]["id"] == int(artifacts[2])
                    and (name is None or a["name"] == name)
                ]
                return 200, {"total_count": len(listed), "artifacts": listed}, {}
            if archive:
                item = self._artifacts.get(int(archive[2]))
                if item is None or item["_repo"] != archive[1]:
                    return 404, {"message": "Not Found"}, {}
                if item["expired"]:
                    return 410, {"message": "Artifact has expired"}, {}
                location = f"{self.public_url or base}/_blobs/{item['id']}"
                return 302, {}, {"Location": location}
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

    def _introspect(self, method: str, path: str, raw: bytes) -> tuple[int, Any, dict[str, str]]:
        if path == "/_fake/runs" and method == "POST":
            spec = json.loads(raw)
            artifacts = {a["name"]: zip_of(a["files"]) for a in spec.pop("artifacts", [])}
            run_id = self.add_run(
                spec.pop("repo"),
                spec.pop("workflow"),
                spec.pop("branch"),
                spec.pop("head_sha"),
                artifacts=artifacts,
                **spec,
            )
            return 201, {"id": run_id}, {}
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
            binary = isinstance(reply, bytes)
            data = reply if binary else json.dumps(reply).encode("utf-8")
            self.send_response(status)
            kind = "application/zip" if binary else "application/json; charset=utf-8"
            self.send_header("Content-Type", kind)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    return _Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="A fake GitHub REST API (issue comments, workflow runs, artifacts)."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--prefix", default="", help="path prefix, e.g. /api/v3")
    parser.add_argument(
        "--token",
        action="append",
        default=[],
        metavar="TOKEN[:read|write[+noactions]]",
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
