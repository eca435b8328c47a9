"""The workflows we ship or document, as text: the README's and docs/action.md's complete
workflows (``on:`` and ``jobs:``), the one ``flakestorm init --github`` writes, and the
repository's own under ``.github/workflows``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "README.md", ROOT / "docs" / "action.md")
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def documented_workflows() -> dict[str, str]:
    """The complete workflows in the README and docs/action.md, named ``DOC-N`` (the N-th
    yaml block of that document)."""
    found = {}
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for n, match in enumerate(re.finditer(r"```yaml\n(.*?)```", text, re.S), start=1):
            body = match[1]
            if re.search(r"^on:", body, re.M) and re.search(r"^jobs:", body, re.M):
                found[f"{doc.name}-{n}"] = body
    return found


def shipped_workflows() -> dict[str, str]:
    """The documented workflows and the one ``flakestorm init --github`` writes."""
    from flakestorm.authoring.starter import STARTER_WORKFLOW

    return {**documented_workflows(), "init-github": STARTER_WORKFLOW}


def readme_workflow() -> str:
    """The README's copy-paste workflow."""
    (body,) = [b for n, b in documented_workflows().items() if n.startswith("README")]
    return body
