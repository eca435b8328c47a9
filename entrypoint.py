"""The Docker image's entrypoint: the flakestorm GitHub Action, or the chaos proxy.

``FLAKESTORM_MODE=proxy`` serves the chaos proxy (the image as a workflow service container);
otherwise this is the action: read the inputs (``INPUT_*``), load the config, run it with the
engine, and hand the result to the builders of ``flakestorm/github/`` (judgement, reports,
summary, outputs, annotations, the PR comment: :func:`flakestorm.github.publish.publish`)::

    inputs ─> Settings ─> config (+ inputs that override it) ─> engine ─> RunResult ─> exit code

Exit codes (SPEC §5): 0 passed, 1 the gate failed, 2 a config or input error (nothing ran),
3 an infrastructure error (agent never ready, proxy unreachable) or an internal error.

Secrets (the config's values from the environment, the token) are masked before anything else
is printed; agent output never reaches the log raw. The engine, the loader and the reporters are
imported once the action needs them (never by the proxy).
"""

from __future__ import annotations

if __name__ == "__main__":  # a cancel can come at any moment: the signals are handled first
    from flakestorm.stopping import handle_signals_from_start

    SIGNALS = handle_signals_from_start()

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from flakestorm.errors import ConfigError, ExitCode, FlakestormError
from flakestorm.github.client import GitHub
from flakestorm.github.notes import STARTING_GROUP, TITLE, Level, Note
from flakestorm.github.settings import Command, Settings, SettingsError, parse_settings
from flakestorm.github.step import Step
from flakestorm.stopping import Interrupted, Stop, stopping_on_signals

if TYPE_CHECKING:
    from flakestorm.config import OutputFormat
    from flakestorm.results.model import RunResult

__all__ = ["STARTING_GROUP", "main", "run_action"]


def main(env: Mapping[str, str], gh: GitHub | None = None) -> int:
    """Run the action (or the proxy) for the environment ``env``; return the exit code."""
    mode = env.get("FLAKESTORM_MODE", "").strip().lower()
    if mode == "proxy":  # the image as the chaos proxy service, until SIGTERM
        from flakestorm.chaos.proxy.serving import serve_from_env

        try:
            serve_from_env(env)
        except FlakestormError as exc:  # a config error exits 2
            print(f"error: {exc}", file=sys.stderr)
            return int(exc.exit_code)
        return int(ExitCode.PASSED)
    gh = gh if gh is not None else GitHub(env)
    if mode not in ("", "action"):
        from flakestorm.reporters.escape import log_line

        shown = f"FLAKESTORM_MODE={log_line(mode, 40)!r}"
        gh.error(f"{shown} is not one of: action, proxy", title=TITLE)
        return int(ExitCode.CONFIG_ERROR)
    if gh.token:
        gh.add_mask(gh.token)
    try:
        settings = parse_settings(env)
    except SettingsError as exc:
        gh.error(str(exc), title=f"{TITLE}: bad input")
        return int(ExitCode.CONFIG_ERROR)
    return run_action(settings, gh, env)


def run_action(settings: Settings, gh: GitHub, env: Mapping[str, str]) -> int:
    """The action for ``settings`` in the step's environment ``env`` (the workspace, the
    config's ``${VAR}``, the baseline's ``GITHUB_*``): the exit code."""
    from flakestorm.github.verdict import CANCELLED, cancelling, no_config

    step = Step.of(settings, env)
    if settings.command is Command.MERGE:
        return _merge(step, gh)
    if not step.config_path.exists() or step.config_path.is_dir():  # a pipe is read, as by the CLI
        gh.annotate(Level.ERROR, no_config(step.config_name))
        return int(ExitCode.CONFIG_ERROR)
    stop = Stop()
    where: list[Path] = []  # the report directory, once the config says it
    # SIGINT then SIGTERM (a cancelled job) from before the config is read: the reports get written
    with stopping_on_signals(stop, lambda: gh.log(cancelling(step, where))):
        code = _load_and_run(step, gh, stop, where)
    if stop.is_set() and code != ExitCode.INFRASTRUCTURE_ERROR:  # a config error, say
        gh.annotate(Level.ERROR, CANCELLED)
        return int(ExitCode.INFRASTRUCTURE_ERROR)  # a cancelled run always exits 3
    return code


def _load_and_run(step: Step, gh: GitHub, stop: Stop, where: list[Path]) -> int:
    """Read the config, run the command with the engine (its progress in the log), publish
    (``where`` gets the report directory as soon as the config says it)."""
    from flakestorm.engine import runner
    from flakestorm.github import publish
    from flakestorm.github.progress import Progress, run_title
    from flakestorm.loader import load_config
    from flakestorm.redaction import Redactor, redacting

    try:
        loaded = load_config(step.config_file(), env=step.env)
    except ConfigError as exc:
        publish.config_problems(step, gh, exc.problems, exc.warnings)
        return int(ExitCode.CONFIG_ERROR)
    secrets = publish.config_read(step, gh, loaded)
    where.append(out_dir := step.report_dir(loaded.config.output.dir))
    run = runner.run_contract_phase if step.settings.command is Command.CONTRACT else runner.run_ci

    def work() -> tuple[RunResult, Iterable[OutputFormat]]:
        with Progress(gh, run_title(step.settings), step.settings.redact.public) as progress:
            how = {"stop": stop, "on_event": progress, "on_notice": progress.notice}
            result = run(loaded, step.overrides(out_dir), **how)
        return result, loaded.config.output.formats

    with redacting(Redactor(secrets)):  # every log line and report redacted before any cut
        return publish.attempt(step, gh, out_dir, work)


def _merge(step: Step, gh: GitHub) -> int:
    """``command: merge``: the shards' results merged into the run's result, published as one
    (the items spooled in the report directory)."""
    from flakestorm.engine.merge import leaving_nothing, merge, output_formats, read_shards
    from flakestorm.github.publish import attempt

    listed, out_dir = step.settings.shard_results, step.report_dir("flakestorm-reports")

    def work() -> tuple[RunResult, Iterable[OutputFormat]]:
        with gh.group(f"flakestorm merge: {' '.join(listed)}"), leaving_nothing(out_dir):
            shards = read_shards([step.root / p for p in listed], out_dir)
            gh.say(Note(f"shard {s.result.shard}: {step.relative(s.path)}") for s in shards)
            formats = output_formats(shards)
            return merge(shards, step.settings.min_score), formats

    return attempt(step, gh, out_dir, work)


if __name__ == "__main__":
    try:
        code = main(os.environ)
    except Interrupted as exc:  # a second signal before the run took the signals over
        print(f"flakestorm: interrupted ({exc.name}): nothing more was done", flush=True)
        code = int(ExitCode.INFRASTRUCTURE_ERROR)
    if SIGNALS.exit_code(code) != code:
        GitHub(os.environ).error(SIGNALS.interrupted(), title=f"{TITLE}: cancelled")
    sys.exit(SIGNALS.exit_code(code))
