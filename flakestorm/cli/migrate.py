"""``flakestorm migrate``: a flakestorm 1.x / 2.0.0 config rewritten in today's form
(:mod:`flakestorm.authoring.migrate`), written, then loaded as ``validate`` loads it."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flakestorm.cli.app import config_option, main, output_option
from flakestorm.errors import ConfigError, FlakestormError, UsageError

if TYPE_CHECKING:
    from flakestorm.authoring.migrate import Migrated

STDOUT = Path("-")


@main.command()
@config_option
@output_option(
    "output",
    "Write the migrated config to this file (- for stdout) and no other file.",
    directory=False,
    allow_dash=True,
)
def migrate(config_path: Path, output: Path | None) -> None:
    """Rewrite a flakestorm 1.x / 2.0.0 config (and its replay session files) in today's form.

    Each change is listed as FILE:LINE (the line as it was): what was rewritten, and what was
    removed because it has no equivalent, with why. Only the lines that change are touched:
    comments, quoting and key order stay. A file that needs no change is left as it is.

    Without -o, the config and the replay session files it names are rewritten in place. With
    -o FILE, the migrated config goes to FILE and no other file is written (its relative
    paths, such as replays.sessions[].file, are then read from FILE's directory); session
    files that need a change are listed but not rewritten (run without -o to rewrite them).

    The result is validated before anything is written: if it would be refused for a change
    migrate made, no file is written (exit 3: a defect of migrate). Once written, it is loaded
    as `flakestorm validate` loads it: exit 2 with the problems that remain (what migrate
    cannot fix), 0 when it is valid.
    """
    from flakestorm.authoring.migrate import migrate_project
    from flakestorm.authoring.migrate_check import made_by_migrate
    from flakestorm.loader.sessions import shown

    files = migrate_project(config_path)
    to_stdout = output == STDOUT
    say = partial(click.echo, err=to_stdout)
    for migrated in files:
        for change in migrated.changes:
            say(str(change))
    made = made_by_migrate(files[0], config_path.parent)
    if made:
        raise FlakestormError(
            f"{shown(config_path)}: nothing written: what migrate would write is refused for "
            "a change migrate made (this is a bug in flakestorm, please report it at "
            "https://github.com/flakestorm/flakestorm/issues):\n"
            + "\n".join(f"{p.path or '(the file)'}: {p.message}" for p in made)
        )
    for i, migrated in enumerate(files):
        name = shown(migrated.path)
        if not migrated.changed:
            if not migrated.changes:  # (else a change says why it is not rewritten)
                say(f"{name}: nothing to change")
        elif output is None:
            _write(migrated.path, migrated.after)
            say(f"rewrote {name} ({_count(migrated)})")
        elif i:
            say(f"{name}: not rewritten ({_count(migrated)}; -o writes only the config)")
    if to_stdout:
        click.echo(files[0].after, nl=False)
    elif output is not None:
        _write(output, files[0].after)
        say(f"wrote {output}")
    target = config_path if output is None else output
    name = "<stdout>" if to_stdout else shown(target)
    _validate(files[0].after, name, config_path.parent if to_stdout else target.parent, say)


def _count(migrated: Migrated) -> str:
    n = len(migrated.changes)
    return f"{n} change{'s' if n != 1 else ''}"


def _write(path: Path, text: str) -> None:
    try:
        path.write_bytes(text.encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot write {path} ({exc.strerror or exc})") from None


def _validate(text: str, name: str, base_dir: Path, say: Callable[[str], None]) -> None:
    """Load the migrated config: its warnings on stderr; its problems raise (exit 2)."""
    from flakestorm.loader import load_config_text

    try:
        loaded = load_config_text(text, filename=name, base_dir=base_dir)
    except ConfigError:
        click.echo(f"{name}: problems remain that migrate cannot fix:", err=True)
        raise
    masked = loaded.redactor
    for warning in loaded.warnings:
        click.echo(masked(f"warning: {warning}"), err=True)
    say(f"ok: {name} is valid")
