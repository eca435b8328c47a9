"""Where the ``llm`` generator keeps its answers: one JSON file per mutation under
``<mutations.cache_dir>/mutations/``, keyed by (model, type, prompt, index). Reading needs no
HTTP client, so ``validate`` can say what a run would find there."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from flakestorm.config import MutationType

CACHE_VERSION = 1


def cache_path(cache_dir: Path, model: str, kind: MutationType, prompt: str, index: int) -> Path:
    """The file of variant ``index`` of ``kind`` for ``prompt`` written by ``model``."""
    key = json.dumps([CACHE_VERSION, model, kind.value, prompt, index])
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return cache_dir / "mutations" / f"{digest[:32]}.json"


def read_cache(path: Path) -> str | None:
    """The cached answer, or None when there is none (or it cannot be read)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    text = data.get("text") if isinstance(data, dict) else None
    return text if isinstance(text, str) and text else None
