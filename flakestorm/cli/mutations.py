"""``flakestorm mutations preview``: what the mutation phase would send, without calling the
agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flakestorm.cli.app import config_option, load, main, seed_option
from flakestorm.errors import UsageError

if TYPE_CHECKING:
    from flakestorm.loader import LoadedConfig


@main.group()
def mutations() -> None:
    """The mutation phase's mutations."""


def _shown(value: str, limit: int = 2000) -> str:
    """A prompt on one line, exactly: escapes (``\\n``) visible, workflow commands defused."""
    from flakestorm.reporters.escape import log_line

    return log_line(json.dumps(value, ensure_ascii=False)[1:-1], limit)


@mutations.command("preview")
@config_option
@click.option("--type", "kind", default=None, metavar="TYPE", help="Only this mutation type.")
@click.option(
    "--prompt",
    "prompt_number",
    type=click.IntRange(1),
    default=None,
    metavar="N",
    help="Only the mutations of the N-th golden prompt (1-based).",
)
@seed_option(": what a run with the same --seed sends")
def preview(
    config_path: Path, kind: str | None, prompt_number: int | None, seed: int | None
) -> None:
    """Print every mutation a run would send (the mutated prompt, or the request changes),
    without calling the agent. With the llm generator, the endpoint is asked (or its cache
    read)."""
    from flakestorm.config import MutationType
    from flakestorm.engine.phases.mutation import plan_mutations
    from flakestorm.engine.runner import Overrides, apply_overrides

    loaded = apply_overrides(load(config_path), Overrides(seed=seed))
    config = loaded.config
    if config.mutations is None:
        raise UsageError(f"{config_path} has no `mutations` section: nothing to preview")
    if kind is not None and kind not in {k.value for k in MutationType}:
        from flakestorm.structure.wording import did_you_mean

        guess = did_you_mean(kind, [k.value for k in MutationType])
        hint = f"did you mean {guess!r}?; " if guess else ""
        known = ", ".join(k.value for k in MutationType)
        raise UsageError(f"--type {kind!r} is not a mutation type ({hint}{known})")
    if prompt_number is not None and prompt_number > len(config.golden_prompts):
        raise UsageError(
            f"--prompt {prompt_number}: the config has {len(config.golden_prompts)} golden prompts"
        )
    masked = loaded.redactor
    plan = plan_mutations(loaded)
    planned = plan.mutations
    if kind is not None and not any(m.type.value == kind for m in planned):
        raise UsageError(
            f"--type {kind}: this config generates no {kind} mutations ({_why(loaded, kind)})"
        )
    shown = 0
    for mutation in planned:
        if kind is not None and mutation.type.value != kind:
            continue
        if prompt_number is not None and mutation.prompt_index != prompt_number - 1:
            continue
        shown += 1
        click.echo(
            masked(
                f"#{mutation.index} {mutation.id} · {mutation.transform} "
                f"(weight {mutation.weight:g}, {mutation.generator})"
            )
        )
        click.echo(masked(f"  original: {_shown(mutation.original)}"))
        for number, turn in enumerate(mutation.turns, 1):  # sent as real turns first
            click.echo(masked(f"  turn {number}:   {_shown(turn)}"))
        click.echo(masked(f"  sent:     {_shown(mutation.prompt)}"))
        if mutation.request is not None:
            for change in mutation.request.changes:
                click.echo(masked(f"  request:  {_shown(change, 300)}"))
    click.echo(masked(f"{shown} mutation{'s' if shown != 1 else ''}"), err=True)
    for note in plan.notes:
        click.echo(masked(note), err=True)


def _why(loaded: LoadedConfig, kind: str) -> str:
    """Why the config generates no mutation of type ``kind``."""
    from flakestorm.mutations.registry import types_of

    config = loaded.config
    assert config.mutations is not None
    generated = [k.value for k in types_of(config)]
    if kind in generated:
        return f"mutations.count {config.mutations.count} per golden prompt leaves it out"
    return f"mutations.types: {', '.join(generated)}"
