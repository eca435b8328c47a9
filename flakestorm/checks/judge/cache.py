"""Where judge verdicts are kept: one JSON file per judged output, under
``<cache dir>/judge/<group>/``, where the group is (judge model, rubric, examples) and the file
name a digest of the exact output. A rerun reads its verdicts from there and asks the judge
nothing; ``validate`` counts the files of each group (:func:`count`). Only verdicts are kept:
an answer that is not one is never written, and a verdict that disagreed with its calibration
example is removed (:func:`remove`)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from flakestorm.checks.judge.asking import Answer
from flakestorm.config import Config, JudgeExample
from flakestorm.errors import HarnessError

CACHE_VERSION = 2
"""Part of every group's key. 2: answers are read strictly (a verdict is one JSON object or the
one word PASS or FAIL); the verdicts version 1 kept were read from prose too, and may be passes
nobody gave, so none of them is read again."""
DEFAULT_DIR = ".flakestorm-cache"


def cache_root(config: Config, base_dir: Path) -> Path:
    """The run's cache folder: ``mutations.cache_dir`` (default ``.flakestorm-cache``) beside
    the config, shared with the llm mutation generator."""
    mutations = config.mutations
    return base_dir / (mutations.cache_dir if mutations is not None else DEFAULT_DIR)


def _digest(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def group_dir(root: Path, model: str, rubric: str, examples: Sequence[JudgeExample]) -> Path:
    """The folder of the verdicts of ``model`` on ``rubric`` with ``examples``."""
    shown = [[e.output, e.verdict.value] for e in examples]
    return root / "judge" / _digest([CACHE_VERSION, model, rubric, shown])


def verdict_path(group: Path, output: str) -> Path:
    return group / f"{_digest(output)}.json"


def read(path: Path) -> Answer | None:
    """The cached verdict, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    verdict, reason = data.get("verdict"), data.get("reason")
    if verdict not in ("PASS", "FAIL") or not isinstance(reason, str):
        return None
    return Answer(verdict == "PASS", reason)


def write(path: Path, model: str, answer: Answer) -> None:
    """Written whole or not at all (a temporary file renamed), so concurrent runs are safe."""
    data = {"model": model, "verdict": "PASS" if answer.passed else "FAIL", "reason": answer.reason}
    try:
        write_whole(path, data)
    except OSError as exc:
        raise HarnessError(f"cannot write the judge cache {path.parent}: {exc}") from exc


def remove(path: Path) -> None:
    """The verdict at ``path`` no longer kept (a verdict that failed calibration); OSError when
    it is there and cannot be removed."""
    path.unlink(missing_ok=True)


def count(group: Path) -> int:
    """How many verdicts the group holds."""
    try:
        return sum(1 for p in group.iterdir() if p.suffix == ".json")
    except OSError:
        return 0


def write_whole(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, written whole or not at all (a temporary file renamed), so
    concurrent runs are safe; OSError when it cannot be written. The llm mutation generator's
    cache is written with it too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, ensure_ascii=False)
    os.replace(tmp, path)
