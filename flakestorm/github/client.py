"""GitHub I/O for the action: the one class that talks to the runner and to the REST API.

Everything the action tells GitHub goes through :class:`GitHub`:

- **workflow commands** on stdout: annotations (``::error file=…,line=…::``), masks
  (``::add-mask::``), log groups, and ``::stop-commands::`` around text that may not be trusted;
- **file commands**: step outputs (``GITHUB_OUTPUT``) and the job summary
  (``GITHUB_STEP_SUMMARY``);
- **the sticky PR comment** through the REST API (``GITHUB_API_URL``, so GitHub Enterprise
  works too; which comment is the run's and what its body becomes:
  :mod:`flakestorm.github.pr_comment`);
- **reads for the baseline** (:meth:`GitHub.get_json`, :meth:`GitHub.download`): the seam
  :mod:`flakestorm.github.baseline_source` finds the base branch's run and its artifact through.
  They
  raise :class:`RestError`, never requests' exceptions.

Escaping (the runner's rules): command data ``%`` → ``%25``, ``\\r`` → ``%0D``, ``\\n`` →
``%0A``; property values additionally ``:`` → ``%3A`` and ``,`` → ``%2C``. The runner keeps 10
annotations of each kind per step and cuts a message at 4,096 characters; :class:`GitHub`
enforces both itself so what is shown is what was meant.

Nothing here raises for a GitHub problem: a comment that cannot be posted (fork pull request,
read-only token, API down) becomes a notice or a warning and a :class:`CommentOutcome`; the
job's verdict never depends on it. ``requests`` exceptions are translated here and never leave.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import urlencode, urlsplit

import requests

from flakestorm.errors import RestError
from flakestorm.github.notes import Annotation as Annotation
from flakestorm.github.notes import Level as Level
from flakestorm.github.notes import Note, Where
from flakestorm.github.pr_comment import COMMENT_LIMIT as COMMENT_LIMIT
from flakestorm.github.pr_comment import Comment, marked, sticky_body
from flakestorm.github.pr_comment import CommentAction as CommentAction
from flakestorm.github.pr_comment import CommentOutcome as CommentOutcome
from flakestorm.redaction import active

if TYPE_CHECKING:
    from typing_extensions import Unpack

ANNOTATION_LIMIT = 10
"""Annotations of one kind the runner keeps per step."""

MESSAGE_LIMIT = 4096
"""Characters of an annotation message the runner keeps."""

SUMMARY_LIMIT_BYTES = 1024 * 1024
"""The job summary of a step must stay under this (the runner drops a larger one)."""

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
API_TIMEOUT_S = 30.0
MAX_PAGES = 100
"""Comment pages read when looking for the sticky comment (100 comments a page)."""

_OUTPUT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


# --------------------------------------------------------------------------- escaping


def escape_data(text: str) -> str:
    """Escape a workflow command's data (after the ``::``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a workflow command property value (``file=``, ``title=`` …)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, data: str, properties: Mapping[str, str | int | None] = {}) -> str:
    """One workflow command line: ``::name k=v,k=v::data``, escaped."""
    props = ",".join(
        f"{key}={escape_property(str(value))}"
        for key, value in properties.items()
        if value is not None
    )
    return f"::{name}{' ' + props if props else ''}::{escape_data(data)}"


def _cut(text: str, limit: int) -> str:
    text = active()(text)  # redact, then cut
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _token(avoid: str = "") -> str:
    """A random token that does not occur in ``avoid``."""
    while True:
        token = secrets.token_hex(16)
        if token not in avoid:
            return token


# --------------------------------------------------------------------------- pull requests


@dataclass(frozen=True)
class PullRequest:
    """The pull request a run belongs to, from the event payload."""

    repository: str
    """``owner/name`` of the base repository (where the comment goes)."""
    number: int
    fork: bool
    """True when the head branch lives in another repository: the token is read-only."""


def pull_request_of(env: Mapping[str, str]) -> PullRequest | None:
    """The pull request of this run (``GITHUB_EVENT_PATH``), or None when it is not one.

    ``pull_request`` / ``pull_request_target`` events carry ``pull_request.number``; comment
    events on a pull request carry ``issue.number`` (and ``issue.pull_request``).
    """
    repository = env.get("GITHUB_REPOSITORY", "")
    event_path = env.get("GITHUB_EVENT_PATH", "")
    if not repository or not event_path:
        return None
    try:
        event = json.loads(Path(event_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(event, dict):
        return None
    pr = event.get("pull_request")
    if isinstance(pr, dict) and isinstance(pr.get("number"), int):
        head = pr.get("head") if isinstance(pr.get("head"), dict) else {}
        head_repo = head.get("repo") if isinstance(head, dict) else None
        head_name = head_repo.get("full_name") if isinstance(head_repo, dict) else None
        # pull_request_target runs in the base repository with a write token, forks included
        fork = env.get("GITHUB_EVENT_NAME") != "pull_request_target" and head_name != repository
        return PullRequest(repository, pr["number"], fork)
    issue = event.get("issue")
    if (
        isinstance(issue, dict)
        and isinstance(issue.get("number"), int)
        and isinstance(issue.get("pull_request"), dict)
    ):
        return PullRequest(repository, issue["number"], fork=False)
    return None


# --------------------------------------------------------------------------- comments


class _ApiError(Exception):
    """A REST call that did not succeed (private: the public methods return outcomes)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


FORK_NOTICE = (
    "flakestorm: not commenting on this pull request: it comes from a fork, and GitHub gives "
    "fork pull requests a read-only token. The job summary, annotations and reports are "
    "complete. To comment on fork pull requests, post the comment from a `workflow_run` "
    "workflow (see docs/action.md)."
)


# --------------------------------------------------------------------------- the class


class GitHub:
    """The runner's workflow commands, file commands and the REST API, for one step.

    ``env`` is the step's environment (``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``,
    ``GITHUB_API_URL``, ``GITHUB_REPOSITORY``, ``GITHUB_EVENT_PATH`` …); the REST calls are
    authorised by ``token``, by default the ``github-token`` input (``INPUT_GITHUB-TOKEN``);
    ``out`` is where workflow commands and log lines go (default: stdout).
    """

    def __init__(
        self,
        env: Mapping[str, str],
        session: requests.Session | None = None,
        out: TextIO | None = None,
        token: str | None = None,
    ) -> None:
        self.env = env
        self.token = env.get("INPUT_GITHUB-TOKEN", "").strip() if token is None else token
        self._session = session
        self._out = out
        self._counts: dict[Level, int] = dict.fromkeys(Level, 0)
        self._summary_bytes: int | None = None

    # -- the log

    @property
    def out(self) -> TextIO:
        return self._out if self._out is not None else sys.stdout

    def log(self, line: str) -> None:
        """Write a line we wrote ourselves (not untrusted text: see :meth:`untrusted`)."""
        self.out.write(line + "\n")
        self.out.flush()

    def _command(self, name: str, data: str, properties: Mapping[str, Any] = {}) -> None:
        self.log(command(name, data, properties))

    @contextlib.contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A collapsible group of log lines."""
        self._command("group", title)
        try:
            yield
        finally:
            self._command("endgroup", "")

    def untrusted(self, text: str) -> None:
        """Print ``text`` verbatim with workflow commands off, whatever it contains."""
        token = _token(text)
        self.log(f"::stop-commands::{token}")
        self.out.write(text if text.endswith("\n") else text + "\n")
        self.log(f"::{token}::")

    def say(self, notes: Iterable[Note | None]) -> None:
        """Write a builder's notes in order: log lines, or annotations (None: nothing)."""
        for note in notes:
            if note is None:
                continue
            if note.level is None:
                self.log(note.text)
            else:
                self.annotate(note.level, Annotation(note.text, title=note.title))

    # -- masks

    def add_mask(self, value: str) -> None:
        """Mask ``value`` in the rest of the job's log; each line of a multi-line value too."""
        lines = [value] if "\n" not in value and "\r" not in value else value.splitlines()
        for line in lines:
            if line.strip():
                self._command("add-mask", line)

    # -- annotations

    def annotate(self, level: Level, annotation: Annotation) -> bool:
        """Emit one annotation; False (and a plain log line) once the runner's cap is reached."""
        if self._counts[level] >= ANNOTATION_LIMIT:
            from flakestorm.reporters.escape import log_line  # the reporters: when first needed

            self.log(f"{level.value}: {log_line(annotation.message, MESSAGE_LIMIT)}")
            return False
        self._counts[level] += 1
        self._command(
            level.value,
            _cut(annotation.message, MESSAGE_LIMIT),
            {"file": annotation.file, "line": annotation.line, "title": annotation.title},
        )
        return True

    def annotate_all(
        self,
        level: Level,
        annotations: Sequence[Annotation],
        more: Callable[[int], str],
    ) -> None:
        """Emit ``annotations``, and when they would not all be kept, as many as fit minus one
        followed by one annotation ``more(n_left_out)`` summarising the rest."""
        room = ANNOTATION_LIMIT - self._counts[level]
        if len(annotations) <= room:
            for annotation in annotations:
                self.annotate(level, annotation)
            return
        shown = max(room - 1, 0)
        for annotation in annotations[:shown]:
            self.annotate(level, annotation)
        self.annotate(level, Annotation(more(len(annotations) - shown)))

    def error(self, message: str, **where: Unpack[Where]) -> bool:
        return self.annotate(Level.ERROR, Annotation(message, **where))

    def warning(self, message: str, **where: Unpack[Where]) -> bool:
        return self.annotate(Level.WARNING, Annotation(message, **where))

    def notice(self, message: str, **where: Unpack[Where]) -> bool:
        return self.annotate(Level.NOTICE, Annotation(message, **where))

    # -- file commands

    def set_output(self, name: str, value: str) -> None:
        """Set a step output (``GITHUB_OUTPUT``); any value, multi-line included."""
        if not _OUTPUT_NAME.match(name):
            raise ValueError(f"not a valid output name: {name!r}")
        path = self.env.get("GITHUB_OUTPUT")
        if not path:
            return
        delimiter = f"ghadelimiter_{_token(value)}"
        with open(path, "a", encoding="utf-8", newline="") as f:
            f.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")

    def set_outputs(self, outputs: Iterable[tuple[str, str]]) -> None:
        """Set step outputs, in order (:meth:`set_output` each)."""
        for name, value in outputs:
            self.set_output(name, value)

    def append_summary(self, markdown: str) -> bool:
        """Append to the job summary, truncated (with a note) to stay under 1 MiB in all.

        Returns False when there is no summary file (not running in GitHub Actions).
        """
        path = self.env.get("GITHUB_STEP_SUMMARY")
        if not path:
            return False
        if self._summary_bytes is None:
            try:
                self._summary_bytes = Path(path).stat().st_size
            except OSError:
                self._summary_bytes = 0
        data = markdown if markdown.endswith("\n") else markdown + "\n"
        room = SUMMARY_LIMIT_BYTES - 1 - self._summary_bytes
        encoded = data.encode("utf-8")
        if len(encoded) > room:
            note = "\n\n> **Summary truncated**: the full report is in the report directory.\n"
            keep = max(room - len(note.encode("utf-8")), 0)
            data = encoded[:keep].decode("utf-8", errors="ignore") + note
            encoded = data.encode("utf-8")
            if len(encoded) > room:
                return True
        with open(path, "ab") as f:
            f.write(encoded)
        self._summary_bytes += len(encoded)
        return True

    # -- the REST API

    @property
    def api_url(self) -> str:
        return (self.env.get("GITHUB_API_URL") or DEFAULT_API_URL).rstrip("/")

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "flakestorm-action",
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _request(self, method: str, url: str, body: Mapping[str, Any] | None = None) -> Any:
        """One REST call; returns the response; raises :class:`_ApiError` (never requests')."""
        if self._session is None:
            self._session = requests.Session()
        try:
            response = self._session.request(
                method, url, headers=self._headers(), json=body, timeout=API_TIMEOUT_S
            )
        except requests.RequestException as exc:
            raise _ApiError(f"{method} {url}: {type(exc).__name__}: {exc}") from None
        if not 200 <= response.status_code < 300:
            try:
                detail = str(response.json().get("message", ""))
            except (ValueError, AttributeError):
                detail = response.text[:200]
            raise _ApiError(
                f"{method} {url}: HTTP {response.status_code} {detail}".rstrip(),
                response.status_code,
            )
        return response

    def _same_origin(self, url: str) -> bool:
        """Only follow ``Link`` URLs to the API itself (the token goes with every request)."""
        a, b = urlsplit(url), urlsplit(self.api_url)
        return (a.scheme, a.netloc) == (b.scheme, b.netloc)

    def get_json(self, path: str, params: Mapping[str, str | int] | None = None) -> Any:
        """GET ``path`` (under the API URL, e.g. ``/repos/o/r/actions/runs``) as JSON."""
        query = f"?{urlencode(params)}" if params else ""
        try:
            response = self._request("GET", f"{self.api_url}{path}{query}")
            return response.json()
        except _ApiError as exc:
            raise RestError(str(exc), exc.status) from None
        except ValueError:
            raise RestError(f"GET {path}: the reply is not JSON") from None

    def download(self, path: str, max_bytes: int) -> bytes:
        """GET a file under the API URL, following its redirect (an artifact's zip: GitHub
        answers 302 to a storage URL, and requests drops the token for another host); at most
        ``max_bytes`` bytes, else :class:`RestError`."""
        if self._session is None:
            self._session = requests.Session()
        url = f"{self.api_url}{path}"
        try:
            with self._session.get(
                url, headers=self._headers(), timeout=API_TIMEOUT_S, stream=True
            ) as response:
                if not 200 <= response.status_code < 300:
                    raise RestError(
                        f"GET {path}: HTTP {response.status_code}", response.status_code
                    )
                data = bytearray()
                for chunk in response.iter_content(chunk_size=1 << 16):
                    data += chunk
                    if len(data) > max_bytes:
                        raise RestError(f"GET {path}: larger than {max_bytes:,} bytes")
                return bytes(data)
        except requests.RequestException as exc:
            raise RestError(f"GET {path}: {type(exc).__name__}: {exc}") from None

    def find_comment(self, pr: PullRequest, marker: str) -> Comment | None:
        """The first comment on ``pr`` whose body contains ``marker`` (all pages are read)."""
        url: str | None = (
            f"{self.api_url}/repos/{pr.repository}/issues/{pr.number}/comments?per_page=100"
        )
        pages = 0
        while url is not None and pages < MAX_PAGES:
            response = self._request("GET", url)
            pages += 1
            try:
                items = response.json()
            except ValueError:
                raise _ApiError(f"GET {url}: the reply is not JSON") from None
            if not isinstance(items, list):
                raise _ApiError(f"GET {url}: the reply is not a list of comments")
            found = marked(items, marker)
            if found is not None:
                return found
            following = response.links.get("next", {}).get("url")
            url = following if following and self._same_origin(following) else None
        return None

    def sticky_comment(
        self, marker: str, render: Callable[[str | None], str], create: bool = True
    ) -> CommentOutcome:
        """Create or update the one comment on this run's pull request that holds ``marker``.

        ``render(previous_body)`` makes the new body from the current one (None when there is
        none yet): that is how the score delta is carried from run to run. With ``create``
        False an existing comment is updated but none is added. Never raises for a
        GitHub problem: a fork pull request, a 401/403/404 (read-only or missing token) give a
        notice, any other failure a warning.
        """
        pr = pull_request_of(self.env)
        if pr is None:
            return CommentOutcome(CommentAction.SKIPPED, "not a pull request")
        if pr.fork:
            self.notice(FORK_NOTICE, title="flakestorm: no PR comment")
            return CommentOutcome(CommentAction.SKIPPED, "fork pull request")
        if not self.token:
            self.notice(
                "flakestorm: not commenting on this pull request: the `github-token` input is "
                "empty.",
                title="flakestorm: no PR comment",
            )
            return CommentOutcome(CommentAction.SKIPPED, "no token")
        try:
            existing = self.find_comment(pr, marker)
            if existing is None and not create:
                return CommentOutcome(CommentAction.SKIPPED, "no comment to update")
            body = sticky_body(render(existing.body if existing is not None else None), marker)
            if existing is not None:
                url = f"{self.api_url}/repos/{pr.repository}/issues/comments/{existing.id}"
                response = self._request("PATCH", url, {"body": body})
                action = CommentAction.UPDATED
            else:
                url = f"{self.api_url}/repos/{pr.repository}/issues/{pr.number}/comments"
                response = self._request("POST", url, {"body": body})
                action = CommentAction.CREATED
        except _ApiError as exc:
            return self._comment_failed(exc)
        try:
            reply = response.json()
        except ValueError:
            reply = {}
        reply = reply if isinstance(reply, dict) else {}
        comment_id = reply.get("id")
        html_url = reply.get("html_url")
        return CommentOutcome(
            action,
            comment_id=comment_id if isinstance(comment_id, int) else None,
            url=html_url if isinstance(html_url, str) else None,
        )

    def _comment_failed(self, exc: _ApiError) -> CommentOutcome:
        from flakestorm.reporters.escape import log_line

        if exc.status in (401, 403, 404):
            self.notice(
                "flakestorm: could not comment on the pull request "
                f"(HTTP {exc.status}): the token may be read-only. Give the job "
                "`permissions: pull-requests: write`, or for fork pull requests post the "
                "comment from a `workflow_run` workflow (see docs/action.md). "
                f"Details: {log_line(str(exc), 400)}",
                title="flakestorm: no PR comment",
            )
            return CommentOutcome(CommentAction.SKIPPED, str(exc))
        self.warning(
            f"flakestorm: could not comment on the pull request: {log_line(str(exc), 400)}",
            title="flakestorm: PR comment failed",
        )
        return CommentOutcome(CommentAction.FAILED, str(exc))
