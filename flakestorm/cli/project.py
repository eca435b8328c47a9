"""Commands about the project's files: ``validate`` (also ``contract validate``), ``schema`` and
``init``."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from flakestorm.cli.app import config_option, contract, load, main, starting_up
from flakestorm.errors import ConfigError, ExitCode, FlakestormError, UsageError


@main.command()
@config_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the run plan as JSON: the channel, sessions, and per phase the cells, the "
    "invocations its command sends and how each scenario runs (and why).",
)
def validate(config_path: Path, as_json: bool) -> None:
    """Check the config and summarise what a run would do.

    Runs nothing: prints the agent, the fault channel, the contract matrix, how many agent
    invocations each phase's command sends (the run's own count), the configured phases and
    any warnings. Exit 2 on a config error; with --json its problems are also printed on
    stdout as {"errors": [{"file", "line", "column", "path", "message"}]}.
    """
    try:
        with starting_up():
            from flakestorm.authoring.preview import a2a_agents, judge_states, summary
            from flakestorm.engine.run_plan import plan_run

            loaded = load(config_path)
            plan = plan_run(loaded.config, loaded.base_dir)
    except FlakestormError as exc:
        if as_json and exc.exit_code is ExitCode.CONFIG_ERROR:
            import json

            click.echo(json.dumps({"errors": _errors(exc, config_path)}, indent=2))
        raise  # the text form, on stderr
    masked = loaded.redactor
    warnings = [str(w) for w in loaded.warnings]
    if as_json:
        import json

        document = plan.as_json(tuple(warnings))
        judges = judge_states(loaded.config, loaded.base_dir)
        if judges:
            document["judges"] = [dataclasses.asdict(state) for state in judges]
        agents = a2a_agents(loaded.config)
        if agents:
            document["a2a"] = agents
        click.echo(masked(json.dumps(document, indent=2)))
        return
    click.echo(masked(f"ok: {config_path} is valid"))
    lines = summary(loaded.config, loaded.base_dir, plan)
    width = max([13, *(len(label) + 2 for label, _ in lines)])  # a long label keeps a space
    for label, value in lines:
        click.echo(masked(f"  {label + ':':<{width}}{value}"))
    for warning in [*warnings, *plan.warnings]:
        click.echo(masked(f"warning: {warning}"), err=True)


contract.add_command(validate, "validate")


def _errors(exc: FlakestormError, config_path: Path) -> list[dict[str, object]]:
    """The problems of a refused config as ``validate --json`` prints them. An error that is
    not about a place in the file (no such file) is put at line 1, column 1 of the config."""
    if isinstance(exc, ConfigError):
        return [dataclasses.asdict(problem) for problem in exc.problems]
    message = str(exc).removeprefix(f"{config_path}: ")
    return [{"file": str(config_path), "line": 1, "column": 1, "path": "", "message": message}]


@main.command()
def schema() -> None:
    """Print the JSON Schema of flakestorm.yaml."""
    from flakestorm.authoring.schema import render_schema

    click.echo(render_schema(), nl=False)


@main.command()
@click.option("--github", is_flag=True, help="Also write .github/workflows/flakestorm.yml.")
@click.option("--force", is_flag=True, help="Overwrite existing files.")
@click.option(
    "--path",
    "directory",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The directory to write into.",
)
def init(github: bool, force: bool, directory: Path) -> None:
    """Write a starter flakestorm.yaml (and with --github the README's workflow).

    With --github beside an existing flakestorm.yaml, only the workflow is written: the config
    is yours. Other existing files are kept unless --force is given.
    """
    from flakestorm.authoring.starter import CONFIG_FILE, starter_files

    files = starter_files(github)
    kept = directory / CONFIG_FILE
    if github and kept.exists():
        del files[CONFIG_FILE]  # the workflow is added to a project that has its config
        click.echo(f"kept {kept} (only the workflow is added)")
    targets = {directory / name: text for name, text in files.items()}
    existing = [str(path) for path in targets if path.exists()]
    if existing and not force:
        raise UsageError(f"{', '.join(existing)} already exists (use --force to overwrite)")
    for path, text in targets.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {path} ({exc.strerror})") from None
        click.echo(f"wrote {path}")
    click.echo(
        "next: set agent.endpoint (or AGENT_URL), then run `flakestorm validate`"
        + (" and commit the workflow" if github else "")
    )
