"""Where the baseline comes from: the newest successful run of this workflow on the base branch.

Three REST reads (GitHub's Actions API, ``actions: read``), through a two-method seam
(:class:`Api`: :class:`flakestorm.github.client.GitHub` in the action)::

    GET /repos/{repo}/actions/workflows/{workflow}/runs?branch=B&status=success&…
    GET /repos/{repo}/actions/runs/{run_id}/artifacts?name=ARTIFACT
    GET /repos/{repo}/actions/artifacts/{artifact_id}/zip        (302 to the zip)

The workflow is this run's own, from ``GITHUB_WORKFLOW_REF``
(``owner/repo/.github/workflows/ci.yml@refs/pull/7/merge`` → ``ci.yml``), else looked up from
``GITHUB_RUN_ID``. Runs are newest first; a run of a pull request (a fork may name its branch
``main``) or from another repository never serves as the baseline, and neither does this run.
The newest run that has the artifact is the baseline; an unreadable artifact is reported, not
skipped for an older one.

Nothing here fails a job: every way of not finding a baseline is a :class:`NoBaseline` with a
reason for a notice (``permission`` when the token lacks ``actions: read``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from flakestorm.errors import RestError
from flakestorm.github.artifact import ArtifactError, results_from_zip
from flakestorm.results.model import RunResult
from flakestorm.results.trend import MAX_POINTS, TrendPoint, point_of

__all__ = [
    "MAX_RUNS",
    "Api",
    "Baseline",
    "BaselineRun",
    "History",
    "NoBaseline",
    "Query",
    "age_text",
    "find_baseline",
    "find_history",
    "query_of",
]

MAX_RUNS = 10
"""Successful runs on the base branch looked at for the artifact, newest first."""

MAX_ZIP_BYTES = 256 * 1024 * 1024
"""The largest artifact zip downloaded."""

PERMISSION_HINT = "give the job `permissions: actions: read` (reading workflow runs and artifacts)"


class Api(Protocol):
    """The REST reads the baseline needs (:class:`flakestorm.github.client.GitHub` has them)."""

    def get_json(self, path: str, params: Mapping[str, str | int] | None = None) -> Any: ...

    def download(self, path: str, max_bytes: int) -> bytes: ...


@dataclass(frozen=True)
class Query:
    """What to look for."""

    repository: str
    branch: str
    artifact: str
    workflow: str | None
    """The workflow's file name or id; None: found from ``run_id``."""
    run_id: int | None = None
    """This run (never its own baseline)."""


@dataclass(frozen=True)
class BaselineRun:
    """The workflow run the baseline comes from."""

    id: int
    branch: str
    head_sha: str
    created_at: datetime | None
    url: str | None = None

    @property
    def label(self) -> str:
        """``main @ abc1234``."""
        return f"{self.branch} @ {self.head_sha[:7]}" if self.head_sha else self.branch


@dataclass(frozen=True)
class Baseline:
    run: BaselineRun
    result: RunResult


@dataclass(frozen=True)
class NoBaseline:
    reason: str
    permission: bool = False
    """The token may not read workflow runs (HTTP 403): ``actions: read`` is missing."""
    expected: bool = False
    """Nothing to compare by design (a push to the base branch itself): a log line, not a
    notice."""


def query_of(env: Mapping[str, str], branch: str | None, artifact: str) -> Query | NoBaseline:
    """The query for this workflow run (``GITHUB_*``); ``branch`` overrides the PR's base."""
    repository = env.get("GITHUB_REPOSITORY", "")
    if not repository:
        return NoBaseline("GITHUB_REPOSITORY is not set (not running in GitHub Actions)")
    base = branch or env.get("GITHUB_BASE_REF", "") or _event_base(env)
    if not base:
        return NoBaseline(
            "not a pull request, so there is no base branch to compare with (the "
            "`baseline-branch` input names one)",
            expected=True,
        )
    run = env.get("GITHUB_RUN_ID", "")
    run_id = int(run) if run.isdigit() else None
    workflow = workflow_file(env.get("GITHUB_WORKFLOW_REF", ""))
    if workflow is None and run_id is None:
        return NoBaseline("neither GITHUB_WORKFLOW_REF nor GITHUB_RUN_ID names this workflow")
    return Query(repository, base, artifact, workflow, run_id)


def workflow_file(workflow_ref: str) -> str | None:
    """``ci.yml`` from ``owner/repo/.github/workflows/ci.yml@refs/…`` (None when not one)."""
    path = workflow_ref.split("@", 1)[0]
    marker = "/.github/workflows/"
    if marker not in path:
        return None
    name = path.split(marker, 1)[1]
    return name if name and "/" not in name else None


def _event_base(env: Mapping[str, str]) -> str:
    try:
        event = json.loads(Path(env.get("GITHUB_EVENT_PATH", "")).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    pr = event.get("pull_request") if isinstance(event, dict) else None
    base = pr.get("base") if isinstance(pr, dict) else None
    ref = base.get("ref") if isinstance(base, dict) else None
    return ref if isinstance(ref, str) else ""


def find_baseline(api: Api, query: Query, max_runs: int = MAX_RUNS) -> Baseline | NoBaseline:
    """The newest successful run's report on the base branch, or why there is none."""
    repo = query.repository
    try:
        workflow, runs = _successful_runs(api, query, max_runs)
        if not runs:
            return NoBaseline(
                f"no successful run of {workflow} on {query.branch} yet (the baseline appears "
                f"once a run on {query.branch} has uploaded the `{query.artifact}` artifact)"
            )
        for run in runs[:max_runs]:
            artifact = _artifact_of(api, repo, run, query.artifact)
            if artifact is None:
                continue
            size = artifact.get("size_in_bytes")
            if isinstance(size, int) and size > MAX_ZIP_BYTES:
                return NoBaseline(
                    f"the `{query.artifact}` artifact of run {run['id']} is {size:,} bytes "
                    f"(at most {MAX_ZIP_BYTES:,} are downloaded)"
                )
            data = api.download(
                f"/repos/{repo}/actions/artifacts/{artifact['id']}/zip", MAX_ZIP_BYTES
            )
            found = _run(run, query.branch)
            try:
                return Baseline(found, results_from_zip(data))
            except ArtifactError as exc:
                return NoBaseline(f"the `{query.artifact}` artifact of run {found.id}: {exc}")
        return NoBaseline(
            f"none of the last {len(runs[:max_runs])} successful run(s) of {workflow} on "
            f"{query.branch} has an unexpired `{query.artifact}` artifact (set "
            "`baseline-artifact` to the name your workflow uploads the report directory as)"
        )
    except RestError as exc:
        if exc.status == 403:
            return NoBaseline(f"{exc}: {PERMISSION_HINT}", permission=True)
        return NoBaseline(f"could not read the base branch's runs: {exc}")


HISTORY_BYTES = 128 * 1024 * 1024
"""The most the trend downloads over all its artifacts."""
HISTORY_SECONDS = 120.0
"""The longest the trend spends reading earlier runs: what is read by then is shown."""


@dataclass(frozen=True)
class History:
    """The earlier runs' points of the trend, oldest first, and how many had no readable
    report (an expired or missing artifact, a download over the bounds)."""

    points: tuple[TrendPoint, ...]
    skipped: int


def find_history(
    api: Api,
    query: Query,
    digest: str,
    max_runs: int = MAX_POINTS,
    max_bytes: int = HISTORY_BYTES,
    max_seconds: float = HISTORY_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    known: Baseline | None = None,
) -> History | NoBaseline:
    """The scores of the last ``max_runs`` successful runs on the base branch (SPEC §14),
    within ``max_bytes`` of downloads and ``max_seconds``; ``digest``: this run's config's, so
    runs of another config are marked. ``known``: the baseline already read (its run's report
    is not downloaded again)."""
    repo, started = query.repository, clock()
    try:
        _, runs = _successful_runs(api, query, max_runs)
        runs = runs[:max_runs]
        points: list[TrendPoint] = []
        skipped, spent = 0, 0
        for run in runs:
            if known is not None and run["id"] == known.run.id:
                points.append(point_of(known.result, commit=known.run.head_sha, digest=digest))
                continue
            if clock() - started > max_seconds or spent >= max_bytes:
                skipped += 1
                continue
            artifact = _artifact_of(api, repo, run, query.artifact)
            size = artifact.get("size_in_bytes") if artifact is not None else None
            if artifact is None or (isinstance(size, int) and spent + size > max_bytes):
                skipped += 1
                continue
            data = api.download(
                f"/repos/{repo}/actions/artifacts/{artifact['id']}/zip", max_bytes - spent
            )
            spent += len(data)
            try:
                result = results_from_zip(data)
            except ArtifactError:  # a NaN score included: no score to draw
                skipped += 1
                continue
            found = _run(run, query.branch)
            points.append(point_of(result, commit=found.head_sha, digest=digest))
        return History(tuple(reversed(points)), skipped)
    except RestError as exc:
        if exc.status == 403:
            return NoBaseline(f"{exc}: {PERMISSION_HINT}", permission=True)
        return NoBaseline(f"could not read the base branch's runs: {exc}")


def _artifact_of(api: Api, repo: str, run: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """The run's newest unexpired artifact called ``name``, if any."""
    artifacts = api.get_json(
        f"/repos/{repo}/actions/runs/{run['id']}/artifacts", {"name": name, "per_page": 100}
    )
    usable = [
        a
        for a in _items(artifacts, "artifacts")
        if a.get("name") == name and not a.get("expired") and isinstance(a.get("id"), int)
    ]
    return max(usable, key=lambda a: int(a["id"])) if usable else None


def _successful_runs(api: Api, query: Query, max_runs: int) -> tuple[str, list[dict[str, Any]]]:
    """This workflow (its file name or id) and its eligible successful runs on the base
    branch, newest first."""
    repo = query.repository
    workflow = query.workflow or _workflow_of_run(api, repo, query.run_id)
    listing = api.get_json(
        f"/repos/{repo}/actions/workflows/{quote(workflow, safe='')}/runs",
        {
            "branch": query.branch,
            "status": "success",
            "exclude_pull_requests": "true",
            "per_page": max_runs,
        },
    )
    return workflow, [r for r in _items(listing, "workflow_runs") if _eligible(r, query)]


def _workflow_of_run(api: Api, repo: str, run_id: int | None) -> str:
    run = api.get_json(f"/repos/{repo}/actions/runs/{run_id}")
    workflow = run.get("workflow_id") if isinstance(run, dict) else None
    if not isinstance(workflow, int):
        raise RestError(f"run {run_id} has no workflow_id")
    return str(workflow)


def _items(listing: Any, key: str) -> list[dict[str, Any]]:
    items = listing.get(key) if isinstance(listing, dict) else None
    if not isinstance(items, list):
        raise RestError(f"the reply has no `{key}` list")
    return [i for i in items if isinstance(i, dict)]


def _eligible(run: Mapping[str, Any], query: Query) -> bool:
    head_repo = run.get("head_repository")
    full_name = head_repo.get("full_name") if isinstance(head_repo, dict) else query.repository
    return (
        isinstance(run.get("id"), int)
        and run.get("id") != query.run_id
        and run.get("conclusion", "success") == "success"
        and run.get("head_branch", query.branch) == query.branch
        and not str(run.get("event", "")).startswith("pull_request")
        and full_name == query.repository
    )


def _run(run: Mapping[str, Any], branch: str) -> BaselineRun:
    sha = run.get("head_sha")
    url = run.get("html_url")
    return BaselineRun(
        id=int(run["id"]),
        branch=branch,
        head_sha=sha if isinstance(sha, str) else "",
        created_at=_time(run.get("run_started_at") or run.get("created_at")),
        url=url if isinstance(url, str) else None,
    )


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=timezone.utc)


def age_text(created: datetime | None, now: datetime) -> str:
    """``3 hours old`` (``age unknown`` without a time)."""
    if created is None:
        return "age unknown"
    seconds = max((now - created).total_seconds(), 0.0)
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            n = int(seconds // size)
            return f"{n} {unit}{'' if n == 1 else 's'} old"
    return "less than a minute old"
