"""Rewrite every ``NAME.expected`` beside its config: ``python -m tests.configs.regenerate``.

The expected file holds what the loader reports for ``NAME.yaml``, one line each, exactly as the
CLI prints it on stderr: the errors of a refused config (with its ``warning: ...`` lines, in
file order), or the ``warning: ...`` lines of a config that loads. An empty file means the
config loads without a word.
"""

from __future__ import annotations

import sys
from pathlib import Path

from flakestorm.errors import ConfigError
from flakestorm.loader import load_config_text

HERE = Path(__file__).resolve().parent
KINDS = ("invalid", "valid", "upstream")
ENV = {"FLAKESTORM_TEST_TOKEN": "s3cret-token", "HOME": "/home/tester"}
"""The environment fixtures are loaded with: nothing from the real one leaks in."""


def render(config: Path) -> str:
    """What the loader reports for ``config``, named by its bare file name."""
    text = config.read_text(encoding="utf-8")
    try:
        loaded = load_config_text(text, filename=config.name, env=ENV, base_dir=config.parent)
    except ConfigError as exc:
        return "".join(f"{line}\n" for line in exc.lines())
    return "".join(f"warning: {w}\n" for w in loaded.warnings)


def fixtures(kind: str) -> list[Path]:
    return sorted((HERE / kind).glob("*.yaml"))


def main() -> int:
    count = 0
    for kind in KINDS:
        for config in fixtures(kind):
            config.with_suffix(".expected").write_text(render(config), encoding="utf-8")
            count += 1
    print(f"rewrote {count} expected files under {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
