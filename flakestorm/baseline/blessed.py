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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flakestorm.baseline.delta import Key, Seen, items_of, mutation_identity
from flakestorm.results.model import MutationResult, RunResult, Status

FORMAT = 1
KEY = "flakestorm_baseline"
REASON_CHARS = 300
STALE_DAYS = 30
"""A baseline older than this is said to be stale (a warning, never a failure)."""


class BaselineFileError(ValueError):
    """A file that is not a blessed baseline: what is wrong."""


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
    """A blessed baseline document read back; :class:`BaselineFileError` saying what is wrong."""
    if not is_blessed(document):
        raise BaselineFileError(f"not a blessed baseline (no {KEY!r} key)")
    if document[KEY] != FORMAT:
        raise BaselineFileError(
            f"{KEY} {document[KEY]!r}: this version reads format {FORMAT}; bless it again"
        )
    try:
        blessed = document["blessed"]
        index: dict[Key, Seen] = {}
        for phase, items in document["phases"].items():
            for item_id, entry in items.items():
                runs = entry.get("runs") or [0, 0]
                identity = (
                    mutation_identity(item_id, entry["type"], entry["prompt"])
                    if "type" in entry
                    else item_id
                )
                status = Status(entry["status"])
                index[(phase, identity)] = Seen(
                    item_id, status, str(entry["severity"]), int(runs[0]), int(runs[1])
                )
        return Blessed(
            at=datetime.date.fromisoformat(blessed["at"]),
            commit=blessed.get("commit"),
            config_path=str(document["config_path"]),
            config_digest=str(document["config_digest"]),
            index=index,
        )
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise BaselineFileError(f"a blessed baseline with a missing or bad field: {exc}") from None


def load(path: Path) -> Blessed:
    """The blessed baseline in the file ``path``; :class:`BaselineFileError` naming the file
    and what is wrong (a missing file says how to write one)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineFileError(
            f"{path}: no such baseline file (write one with `flakestorm baseline bless "
            f"RESULTS.json -o {path}` and commit it)"
        ) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BaselineFileError(f"{path}: cannot be read as JSON ({exc})") from None
    try:
        return read(document)
    except BaselineFileError as exc:
        raise BaselineFileError(f"{path}: {exc}") from None
