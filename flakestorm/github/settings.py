"""The GitHub Action's settings: its inputs, parsed and checked.

The runner hands a Docker action its inputs as environment variables ``INPUT_<NAME>``: the
input name upper-cased with hyphens kept (``min-score`` → ``INPUT_MIN-SCORE``), an unset input
arriving with its default from ``action.yml``. :func:`parse_settings` turns that mapping into a
frozen :class:`Settings` or raises :class:`SettingsError` naming the input, the value and what
would be valid. An empty value means "not given" (what the runner sends for an input without a
default).

``action.yml``, :data:`INPUTS` (and so :class:`Settings`) and the input table in
``docs/action.md`` are kept in step by ``tests/test_action_contract.py``.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from flakestorm.baseline.delta import FailOn
from flakestorm.errors import UsageError
from flakestorm.results.shards import Shard, ShardError


class Command(str, enum.Enum):
    """What the action runs."""

    CI = "ci"
    """Every configured phase (mutation, chaos, contract, replay), the overall score and gate."""
    CONTRACT = "contract"
    """The contract matrix only."""
    MERGE = "merge"
    """The shards' results (``shard-results``) merged into the run's verdict: no agent runs."""


class CommentMode(str, enum.Enum):
    """When the sticky pull request comment is written."""

    ALWAYS = "always"
    FAILURES = "failures"
    """Create it only when the gate fails; an existing comment is still kept up to date."""
    OFF = "off"

    def creates(self, passed: bool) -> bool:
        """Whether a run with this verdict may add the comment when the PR has none yet."""
        return self is CommentMode.ALWAYS or (self is CommentMode.FAILURES and not passed)

    @property
    def updates(self) -> bool:
        """Whether an existing comment is updated."""
        return self is not CommentMode.OFF


class BaselineMode(str, enum.Enum):
    """Whether the run is compared with the base branch's (SPEC §8)."""

    AUTO = "auto"
    """Find the newest successful run of this workflow on the base branch and compare."""
    OFF = "off"


@dataclass(frozen=True)
class BaselineFile:
    """``baseline: file:PATH``: a blessed baseline committed in the repository (SPEC §14)."""

    path: str
    """Relative to the workspace."""

    def __str__(self) -> str:
        return f"file:{self.path}"


class Redaction(str, enum.Enum):
    """Whether the job summary and the PR comment quote agent output public-safe."""

    ON = "on"
    """Matched PII masked, replies that failed a leak invariant cut at the leak (public
    repositories: the summary and the comment are world-readable)."""
    OFF = "off"
    """Quoted in full, as in results.json and report.html (private repositories)."""

    @property
    def public(self) -> bool:
        return self is Redaction.ON


class SettingsError(UsageError):
    """An action input has a value that cannot be used (exit 2)."""


@dataclass(frozen=True)
class Settings:
    """The action's inputs, parsed. Field ``x_y`` is input ``x-y``."""

    config: str = "flakestorm.yaml"
    command: Command = Command.CI
    agent_url: str | None = None
    proxy_url: str | None = None
    proxy_token: str | None = None
    """The proxy service's control API token (a secret: never printed)."""
    min_score: float | None = None
    github_token: str = ""
    comment: CommentMode = CommentMode.ALWAYS
    report_dir: str | None = None
    ready_timeout: int | None = None
    """Milliseconds."""
    concurrency: int | None = None
    seed: int | None = None
    baseline: BaselineMode | BaselineFile = BaselineMode.OFF
    baseline_branch: str | None = None
    """Default: the pull request's base branch."""
    baseline_artifact: str = "flakestorm-reports"
    fail_on: FailOn = FailOn.ANY
    shard: Shard | None = None
    shard_results: tuple[str, ...] = ("flakestorm-shards",)
    """Where ``command: merge`` finds the shards' results.json: paths relative to the
    workspace (files, or directories searched for them)."""
    redact: Redaction = Redaction.ON


INPUTS: tuple[str, ...] = tuple(f.name.replace("_", "-") for f in dataclasses.fields(Settings))
"""The action's input names, in ``action.yml`` order."""

OUTPUTS: tuple[str, ...] = (
    "score",
    "passed",
    "contract-score",
    "critical-failures",
    "report-dir",
    "new-failures",
    "fixed",
)
"""The action's output names."""


def input_var(name: str) -> str:
    """The environment variable that carries input ``name`` (hyphens kept)."""
    return "INPUT_" + name.replace(" ", "_").upper()


_E = TypeVar("_E", bound=enum.Enum)


class _Inputs:
    """The action's inputs in ``env``, each read as one kind of value, or a
    :class:`SettingsError` naming the input and what is valid."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env

    def get(self, name: str) -> str | None:
        value = self._env.get(input_var(name), "").strip()
        return value or None

    def choice(self, name: str, kind: type[_E], default: _E) -> _E:
        value = self.get(name)
        if value is None:
            return default
        try:
            return kind(value.lower())
        except ValueError:
            valid = ", ".join(str(m.value) for m in kind)
            raise SettingsError(f"input `{name}`: {value!r} is not one of {valid}") from None

    def number(self, name: str, low: float, high: float) -> float | None:
        value = self.get(name)
        if value is None:
            return None
        try:
            parsed = float(value)
        except ValueError:
            parsed = math.nan
        if not (low <= parsed <= high):
            raise SettingsError(
                f"input `{name}`: {value!r} is not a number from {low:g} to {high:g}"
            )
        return parsed

    def integer(self, name: str, low: int, high: int | None = None) -> int | None:
        value = self.get(name)
        if value is None:
            return None
        try:
            parsed: int | None = int(value, 10)
        except ValueError:
            parsed = None
        if parsed is None or parsed < low or (high is not None and parsed > high):
            bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
            raise SettingsError(f"input `{name}`: {value!r} is not a whole number {bounds}")
        return parsed

    def url(self, name: str) -> str | None:
        value = self.get(name)
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SettingsError(
                f"input `{name}`: {value!r} is not an http(s) URL (e.g. http://agent:8000/chat)"
            )
        return value

    def path(self, name: str, default: str) -> str:
        value = self.get(name) or default
        if "\x00" in value:
            raise SettingsError(f"input `{name}`: the path contains a NUL character")
        return value


def parse_settings(env: Mapping[str, str]) -> Settings:
    """Read the ``INPUT_*`` variables of ``env``; raise :class:`SettingsError` on a bad value."""
    inputs = _Inputs(env)
    get, choice, number, integer, url = (
        inputs.get,
        inputs.choice,
        inputs.number,
        inputs.integer,
        inputs.url,
    )
    command = choice("command", Command, Command.CI)
    comment = choice("comment", CommentMode, CommentMode.ALWAYS)
    written = get("baseline") or ""
    baseline: BaselineMode | BaselineFile
    if written.startswith("file:"):
        path = written[len("file:") :].strip()
        if not path or "\x00" in path:
            raise SettingsError(
                "input `baseline`: file: needs the path of a blessed baseline (e.g. "
                "file:.flakestorm/baseline.json, written by `flakestorm baseline bless`)"
            )
        baseline = BaselineFile(path)
    else:
        try:
            baseline = choice("baseline", BaselineMode, BaselineMode.OFF)
        except SettingsError:
            raise SettingsError(
                f"input `baseline`: {written!r} is not one of auto, off, file:PATH"
            ) from None
    fail_on = choice("fail-on", FailOn, FailOn.ANY)
    redact = choice("redact", Redaction, Redaction.ON)
    seed = get("seed")
    try:
        seed_value = None if seed is None else int(seed, 10)
    except ValueError:
        raise SettingsError(f"input `seed`: {seed!r} is not a whole number") from None
    if fail_on is FailOn.REGRESSION and baseline is BaselineMode.OFF:
        raise SettingsError(
            "input `fail-on`: 'regression' needs a baseline to tell new failures from known "
            "ones: set `baseline: auto` (and `permissions: actions: read`) or `baseline: "
            "file:PATH` (a committed, blessed baseline)"
        )
    shard_text = get("shard")
    try:
        shard = None if shard_text is None else Shard.parse(shard_text)
    except ShardError as exc:
        raise SettingsError(f"input `shard`: {exc}") from None
    if shard is not None and command is Command.MERGE:
        raise SettingsError(
            "input `shard`: `command: merge` merges every shard; set `shard` on the shard "
            "jobs' ci or contract steps"
        )
    shard_results = tuple((get("shard-results") or "").split()) or Settings.shard_results
    for path in shard_results:
        if "\x00" in path:
            raise SettingsError("input `shard-results`: a path contains a NUL character")
    return Settings(
        config=inputs.path("config", Settings.config),
        command=command,
        agent_url=url("agent-url"),
        proxy_url=url("proxy-url"),
        proxy_token=env.get(input_var("proxy-token"), "").strip() or None,
        min_score=number("min-score", 0, 100),
        github_token=env.get(input_var("github-token"), "").strip(),
        comment=comment,
        report_dir=get("report-dir"),
        ready_timeout=integer("ready-timeout", 1),
        concurrency=integer("concurrency", 1, 256),
        seed=seed_value,
        baseline=baseline,
        baseline_branch=get("baseline-branch"),
        baseline_artifact=get("baseline-artifact") or Settings.baseline_artifact,
        fail_on=fail_on,
        shard=shard,
        shard_results=shard_results,
        redact=redact,
    )
