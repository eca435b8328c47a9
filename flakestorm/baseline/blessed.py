"""A committed baseline (SPEC §14): what ``flakestorm baseline bless`` writes from a run's
``results.json``, meant to be committed and reviewed, and what ``baseline: file:PATH`` (the
action's input, ``flakestorm compare --baseline``) compares a run against, as against the base
branch's run. It changes only when someone blesses it: it never drifts by itself.

The file is small, sorted and stable, so it reads well in a diff::

    {
      "flakestorm_baseline": 1,
      "blessed": {"at": "2026-11-27", "commit": "3e0774a…", "from": "reports/results.json"},
      "config_path": "flakestorm.yaml", "config_digest": "…", "seed": 42, "score": 93.5,
      "phases": {
        "contract": {"says-hello[calm]": {"status": "failed", "severity": "critical",
                                          "reason": "…"}},
        "mutation": {"prompt_injection#0.0": {"status": "passed", "type": "prompt_injection",
                                              "prompt": "…"}}
      }
    }

Per cell its status, severity and the invariant's reason (one line); per mutation its status,
type and golden prompt (what matches it across runs); ``runs`` only for repeated items.
"""

from __future__ import annotations

import datetime
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flakestorm.baseline.delta import Key, Seen, items_of, mutation_identity
from flakestorm.config import PhaseName, Severity
from flakestorm.results.model import MutationResult, RunResult, Status
from flakestorm.structure.strict_json import RepeatedKey, unique_keys
from flakestorm.structure.wording import did_you_mean

FORMAT = 1
KEY = "flakestorm_baseline"
REASON_CHARS = 300
STALE_DAYS = 30
"""A baseline older than this is said to be stale (a warning, never a failure)."""


class BaselineFileError(ValueError):
    """A file that is not a blessed baseline: what is wrong (a config error, exit 2, in
    ``compare`` and in the action alike)."""


class MissingBaseline(BaselineFileError):
    """No file where the baseline should be: in the action a notice, as no ``auto`` baseline
    is (a repository that has not blessed one yet); in ``compare``, which was asked to compare
    with that file, a usage error."""


def bless(
    result: RunResult, *, on: datetime.date, commit: str | None, source: str
) -> dict[str, Any]:
    """The baseline document of ``result``, blessed ``on`` at ``commit`` from ``source``."""
    phases: dict[str, dict[str, Any]] = {}
    for (phase, _), item_id, item in items_of(result):
        entry: dict[str, Any] = {"status": item.status.value, "severity": item.severity}
        if isinstance(item, MutationResult):
            entry |= {"type": item.type, "prompt": item.original}
        else:
            entry["reason"] = " ".join(item.reason.split())[:REASON_CHARS]
        if item.runs_total > 1:
            entry["runs"] = [item.runs_passed, item.runs_total]
        phases.setdefault(phase, {})[item_id] = entry
    return {
        KEY: FORMAT,
        "blessed": {"at": on.isoformat(), "commit": commit, "from": source},
        "config_path": result.config_path,
        "config_digest": result.config_digest,
        "seed": result.seed,
        "score": result.overall.score,
        "phases": phases,
    }


def errored_items(result: RunResult) -> list[str]:
    """``phase:id`` of each errored cell and mutation of ``result``: ``bless`` refuses such a
    run, as an errored cell is no known state (read as a known failure, it would hide a later
    genuine failure of that cell)."""
    return [
        f"{phase}:{item_id}"
        for (phase, _), item_id, item in items_of(result)
        if item.status is Status.ERRORED
    ]


def dumps(document: Mapping[str, Any]) -> str:
    """The file's text: sorted keys, two-space indent, one item per line group."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def is_blessed(document: Any) -> bool:
    return isinstance(document, Mapping) and KEY in document


@dataclass(frozen=True)
class Blessed:
    """A blessed baseline read back."""

    at: datetime.date
    commit: str | None
    config_path: str
    config_digest: str
    index: Mapping[Key, Seen]

    @property
    def label(self) -> str:
        """How reports name it: ``the blessed baseline (3e0774a, 2026-11-01)``."""
        commit = f"{self.commit[:7]}, " if self.commit else ""
        return f"the blessed baseline ({commit}{self.at.isoformat()})"

    def age_days(self, today: datetime.date) -> int:
        return max((today - self.at).days, 0)

    def stale(self, today: datetime.date) -> bool:
        return self.age_days(today) > STALE_DAYS

    def age_text(self, today: datetime.date, digest: str) -> str:
        """``45 days old, stale (more than 30): bless a newer run`` — how old it is, and what
        the summary warns of (:meth:`warnings`, in short)."""
        days = self.age_days(today)
        text = f"{days} day{'' if days == 1 else 's'} old"
        if self.stale(today):
            text += f", stale (more than {STALE_DAYS}): bless a newer run"
        if self.config_digest != digest:
            text += ", blessed from another config: bless a run of this one"
        return text

    def warnings(self, today: datetime.date, digest: str) -> list[str]:
        """Why the comparison may mislead: a stale baseline, another config."""
        out = []
        days = self.age_days(today)
        if self.stale(today):
            out.append(
                f"{self.label} is {days} days old (more than {STALE_DAYS}): bless a newer run "
                "so the comparison reflects what good looks like now"
            )
        if self.config_digest != digest:
            out.append(
                f"{self.label} was blessed from another config (digest "
                f"{self.config_digest[:12]}, this run {digest[:12]}): its cells are matched by "
                "id; bless a run of this config"
            )
        return out


def read(document: Any) -> Blessed:
    """A blessed baseline document read back; :class:`BaselineFileError` saying where and what
    is wrong, and what is valid (SPEC §14: another shape, an unknown phase or none is no
    blessed baseline: read as "nothing is known", every failure would pass as new)."""
    if not is_blessed(document):
        raise BaselineFileError(f"not a blessed baseline (no {KEY!r} key)")
    if type(document[KEY]) is not int or document[KEY] != FORMAT:
        raise BaselineFileError(
            f"{KEY} {_shown(document[KEY])}: this version reads format {FORMAT}; bless it again"
        )
    _keys(document, _TOP_KEYS, "the top level")
    blessed = _field(document, "blessed", dict, "blessed")
    _keys(blessed, _BLESSED_KEYS, "blessed")
    at = _field(blessed, "at", str, "blessed.at")
    try:
        on = datetime.date.fromisoformat(at)
    except ValueError:
        raise BaselineFileError(f"blessed.at: {_shown(at)} is not a date (YYYY-MM-DD)") from None
    commit = _field(blessed, "commit", (str, type(None)), "blessed.commit")
    _field(blessed, "from", str, "blessed.from", required=False)
    config_path = _field(document, "config_path", str, "config_path")
    config_digest = _field(document, "config_digest", str, "config_digest")
    _field(document, "seed", (int, type(None)), "seed")
    _field(document, "score", (int, float, type(None)), "score")
    phases = _field(document, "phases", dict, "phases")
    if not phases:
        raise BaselineFileError(
            f"phases: none (a blessed baseline holds at least one of {', '.join(_PHASES)}): "
            "bless a run again"
        )
    index: dict[Key, Seen] = {}
    for phase, items in phases.items():
        if phase not in _PHASES:
            guess = did_you_mean(phase, _PHASES)
            hint = f"; did you mean {guess!r}?" if guess else ""
            raise BaselineFileError(
                f"phases: unknown phase {_shown(phase)} (one of {', '.join(_PHASES)}){hint}"
            )
        if not isinstance(items, dict) or not items:
            raise BaselineFileError(
                f"phases.{phase}: {_shown(items)} is not an object of its cells and mutations"
            )
        for item_id, entry in items.items():
            key, seen = _item(phase, item_id, entry)
            index[key] = seen
    return Blessed(
        at=on,
        commit=commit,
        config_path=config_path,
        config_digest=config_digest,
        index=index,
    )


_TOP_KEYS = (KEY, "blessed", "config_path", "config_digest", "seed", "score", "phases")
_BLESSED_KEYS = ("at", "commit", "from")
_ITEM_KEYS = ("status", "severity", "reason", "type", "prompt", "runs")
_PHASES = tuple(p.value for p in PhaseName)
_SEVERITIES = tuple(s.value for s in Severity)
_STATUSES = tuple(s.value for s in Status)


def _item(phase: str, item_id: str, entry: Any) -> tuple[Key, Seen]:
    """One cell's or mutation's entry: its key and what the delta needs of it."""
    where = f"phases.{phase}[{_shown(item_id)}]"
    if not isinstance(entry, dict):
        raise BaselineFileError(f"{where}: {_shown(entry)} is not an object")
    _keys(entry, _ITEM_KEYS, where)
    status = _field(entry, "status", str, f"{where}.status")
    if status not in _STATUSES:
        raise BaselineFileError(
            f"{where}.status: {_shown(status)} is not one of {', '.join(_STATUSES)}"
        )
    severity = _field(entry, "severity", str, f"{where}.severity")
    if severity not in _SEVERITIES:
        raise BaselineFileError(
            f"{where}.severity: {_shown(severity)} is not one of {', '.join(_SEVERITIES)}"
        )
    if "type" in entry:  # a mutation: matched by its type, golden prompt and variant
        kind = _field(entry, "type", str, f"{where}.type")
        prompt = _field(entry, "prompt", str, f"{where}.prompt")
        identity = mutation_identity(item_id, kind, prompt)
    else:
        _field(entry, "reason", str, f"{where}.reason")
        identity = item_id
    passed, total = 0, 0
    if "runs" in entry:
        runs = entry["runs"]
        if (
            not isinstance(runs, list)
            or len(runs) != 2
            or any(type(n) is not int for n in runs)
            or not 0 <= runs[0] <= runs[1]
            or runs[1] < 2
        ):
            raise BaselineFileError(
                f"{where}.runs: {_shown(runs)} is not [passed, total] (whole numbers, "
                "0 <= passed <= total, total at least 2)"
            )
        passed, total = runs
    return (phase, identity), Seen(item_id, Status(status), severity, passed, total)


def _field(
    document: dict[str, Any],
    name: str,
    kinds: type | tuple[type, ...],
    where: str,
    *,
    required: bool = True,
) -> Any:
    """``document[name]``, checked to be one of ``kinds`` (a bool is no number)."""
    if name not in document:
        if not required:
            return None
        raise BaselineFileError(f"{where}: missing")
    value = document[name]
    wanted = kinds if isinstance(kinds, tuple) else (kinds,)
    if (isinstance(value, bool) and bool not in wanted) or not isinstance(value, wanted):
        raise BaselineFileError(f"{where}: {_shown(value)} is not {_kind_names(wanted)}")
    return value


_KIND_NAMES = {str: "a string", int: "a whole number", float: "a number", dict: "an object"}


def _kind_names(kinds: tuple[type, ...]) -> str:
    names = [_KIND_NAMES.get(k, "null") for k in kinds if not (k is int and float in kinds)]
    return " or ".join(dict.fromkeys(names))


def _keys(document: dict[str, Any], valid: tuple[str, ...], where: str) -> None:
    for key in document:
        if key not in valid:
            guess = did_you_mean(key, valid)
            hint = f"; did you mean {guess!r}?" if guess else ""
            raise BaselineFileError(
                f"{where}: unknown key {_shown(key)} (one of {', '.join(valid)}){hint}"
            )


def _shown(value: Any, top: bool = True) -> str:
    """``value`` as JSON, cut to 60 characters (a file's content, quoted in a message: control
    characters escaped); an object, or a list inside a list or of more than 4 items, by its
    size (never deeper: a list nested 900 deep is said in one line)."""
    if isinstance(value, dict):
        return f"an object of {len(value)} key(s)"
    if isinstance(value, list):
        if top and len(value) <= 4:
            return "[" + ", ".join(_shown(item, top=False) for item in value) + "]"
        return f"a list of {len(value)} item(s)"
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."


MAX_BYTES = 64 * 1024 * 1024
"""The largest baseline file read (``bless`` writes a few hundred bytes per cell)."""

CONFLICT_MARKERS = ("<<<<<<< ", "=======", ">>>>>>> ")


def load(path: Path, max_bytes: int = MAX_BYTES) -> Blessed:
    """The blessed baseline in the file ``path``; :class:`MissingBaseline` when there is no
    file (saying how to write one), else :class:`BaselineFileError` naming the file and what is
    wrong. A file whose size is over ``max_bytes`` is not read; one whose size is not known
    beforehand (a pipe, a device) is read no further than one byte past it."""
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            data = file.read(max_bytes + 1) if size <= max_bytes else b""
    except FileNotFoundError:
        raise MissingBaseline(
            f"{path}: no such baseline file (write one with `flakestorm baseline bless "
            f"RESULTS.json -o {path}` and commit it)"
        ) from None
    except OSError as exc:
        raise BaselineFileError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        if size > max_bytes or len(data) > max_bytes:
            raise BaselineFileError(
                f"over {max_bytes:,} bytes, more than a blessed baseline holds (`baseline "
                "bless` writes a few hundred bytes per cell)"
            )
        return read(parse(data))
    except BaselineFileError as exc:
        raise BaselineFileError(f"{path}: {exc}") from None


def parse(data: bytes) -> Any:
    """The JSON document in ``data`` (UTF-8, a byte order mark allowed); a
    :class:`BaselineFileError` for anything else: a merge conflict, not JSON, nested too
    deeply, a number that is not finite (``NaN``, ``Infinity``, ``1e999``), a key twice."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BaselineFileError(f"not UTF-8 text (byte {exc.start})") from None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(CONFLICT_MARKERS):
            raise BaselineFileError(
                f"line {number}: a merge conflict marker ({line[:7]}): resolve the conflict "
                "by blessing a run again (`flakestorm baseline bless`)"
            )
    try:
        return json.loads(
            text,
            parse_constant=_not_finite,
            parse_float=_finite,
            object_pairs_hook=unique_keys,
        )
    except RecursionError:
        raise BaselineFileError("not JSON (nested too deeply)") from None
    except json.JSONDecodeError as exc:
        raise BaselineFileError(
            f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RepeatedKey as exc:  # which entry counts would be a guess
        raise BaselineFileError(f"the key {_shown(exc.key)} appears twice in one object") from None
    except _NotBaselineJson as exc:
        raise BaselineFileError(str(exc)) from None


class _NotBaselineJson(ValueError):
    """JSON a blessed baseline never holds."""


def _not_finite(constant: str) -> Any:
    raise _NotBaselineJson(f"not finite: {constant} (a number must be finite)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotBaselineJson(f"not finite: {text[:40]} (a number must be finite)")
    return value
