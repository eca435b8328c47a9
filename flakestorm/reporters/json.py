"""``results.json``: the versioned document every other reporter can be rendered from."""

from __future__ import annotations

import json

from flakestorm.results import RunResult, to_document


def render(result: RunResult) -> str:
    return json.dumps(to_document(result), ensure_ascii=True, indent=2) + "\n"
