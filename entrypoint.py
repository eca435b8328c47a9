"""The Docker image's entrypoint: the flakestorm GitHub Action, or the chaos proxy.

``FLAKESTORM_MODE=proxy`` serves the chaos proxy (the image as a workflow service container);
otherwise this is the action: read the inputs (``INPUT_*``), load the config, run, and tell
GitHub what happened (outputs, job summary, annotations, the sticky pull request comment)::

    inputs ─> Settings ─> config (+ inputs that override it) ─> run ─> RunResult
           ─> reports, summary, outputs, annotations, comment ─> exit code

Exit codes (SPEC §5): 0 passed, 1 the gate failed, 2 a config or input error (nothing ran),
3 an infrastructure error (agent never ready, proxy unreachable) or an internal error.

Secrets (values the config took from the environment, and the token) are masked before
anything else is printed; agent output never reaches the log raw.
"""

from __future__ import annotations

if __name__ == "__main__":  # a cancel can come at any moment: the signals are handled first
    from flakestorm.stopping import handle_signals_from_start

    SIGNALS = handle_signals_from_start()

import contextlib
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

from flakestorm.baseline import blessed
from flakestorm.baseline.delta import Change, Delta, FailOn, compare, same_config
from flakestorm.baseline.judgement import Judgement
from flakestorm.config import OutputFormat
from flakestorm.engine import runner
from flakestorm.engine.events import CellFinished, Event, ScenarioFinished
from flakestorm.engine.phases.phase import PhaseName
from flakestorm.errors import ConfigError, ExitCode, FlakestormError, Problem, UsageError
from flakestorm.github import baseline_source as source
from flakestorm.github.client import Annotation, CommentAction, GitHub, Level
from flakestorm.github.settings import (
    BaselineFile,
    BaselineMode,
    Command,
    Settings,
    SettingsError,
    parse_settings,
)
from flakestorm.loader import LoadedConfig, load_config
from flakestorm.redaction import Redactor, active, redacting
from flakestorm.reporters import delta as delta_report
from flakestorm.reporters.escape import log_line
from flakestorm.reporters.public import public, public_cell
from flakestorm.reporters.registry import write_reports
from flakestorm.reporters.terminal import error_verdict_line, scenario_line, verdict_line
from flakestorm.reporters.view import RunVerdict, error_causes, run_verdict
from flakestorm.results import clock
from flakestorm.results.model import InvariantInfo, MutationResult, PhaseOutcome, RunResult, Status
from flakestorm.results.trend import Trend, trend_of
from flakestorm.stopping import GRACE_S, Interrupted, Stop, stopping_on_signals

TITLE = "flakestorm"

__all__ = ["main"]


def main(env: Mapping[str, str], gh: GitHub | None = None) -> int:
    """Run the action (or the proxy) for the environment ``env``; return the exit code."""
    mode = env.get("FLAKESTORM_MODE", "").strip().lower()
    if mode == "proxy":
        return _serve_proxy(env)
    gh = gh if gh is not None else GitHub(env)
    if mode not in ("", "action"):
        gh.error(
            f"FLAKESTORM_MODE={log_line(mode, 40)!r} is not one of: action, proxy", title=TITLE
        )
        return int(ExitCode.CONFIG_ERROR)
    if gh.token:
        gh.add_mask(gh.token)
    try:
        settings = parse_settings(env)
    except SettingsError as exc:
        gh.error(str(exc), title=f"{TITLE}: bad input")
        return int(ExitCode.CONFIG_ERROR)
    return _Action(env, gh, settings).run()


def _serve_proxy(env: Mapping[str, str]) -> int:
    """The image as the chaos proxy service, until SIGTERM (a config error exits 2)."""
    from flakestorm.chaos.proxy.serving import serve_from_env

    try:
        serve_from_env(env)
    except FlakestormError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    return int(ExitCode.PASSED)


class _Action:
    """One run of the action: the steps of :func:`main` after the inputs are read."""

    def __init__(self, env: Mapping[str, str], gh: GitHub, settings: Settings) -> None:
        self.env = env
        self.gh = gh
        self.settings = settings
        self.workspace = Path(env.get("GITHUB_WORKSPACE") or Path.cwd())
        config = Path(settings.config)
        self.config_path = config if config.is_absolute() else self.workspace / config
        self.config_name = self._relative(self.config_path)

    def _relative(self, path: Path) -> str:
        """``path`` relative to the workspace (as annotations and outputs want it)."""
        try:
            return path.resolve().relative_to(self.workspace.resolve()).as_posix()
        except ValueError:
            return path.as_posix()

    def run(self) -> int:
        gh = self.gh
        if self.settings.command is Command.MERGE:
            return self._merge()
        if not self.config_path.is_file():
            gh.error(
                f"{self.config_name}: no such file (set the `config` input to your "
                "flakestorm.yaml, relative to the repository root; did you run "
                "actions/checkout first?)",
                title=f"{TITLE}: no config",
            )
            return int(ExitCode.CONFIG_ERROR)
        stop = Stop()
        where: list[Path] = []  # the report directory, once the config says it

        def stopping() -> None:
            to = f" to {self._relative(where[0])}" if where else ""
            gh.log(
                f"flakestorm: cancelled: invocations in flight get {GRACE_S:g} s, then the "
                f"partial reports are written{to}"
            )

        # SIGINT then SIGTERM (a cancelled job), from before the config is read: the run stops,
        # and the reports still get written
        with stopping_on_signals(stop, stopping):
            code = self._load_and_run(stop, where)
        if stop.is_set() and code != ExitCode.INFRASTRUCTURE_ERROR:  # a config error, say
            gh.error("the run was cancelled: exit 3", title=f"{TITLE}: cancelled")
            return int(ExitCode.INFRASTRUCTURE_ERROR)  # a cancelled run always exits 3
        return code

    def _load_and_run(self, stop: Stop, where: list[Path]) -> int:
        """Read the config, run, report: the exit code (``where`` gets the report directory
        as soon as the config says it)."""
        gh = self.gh
        # relative to the working directory when that is the workspace (as in the action), so
        # reports name the config as the repository does
        here = Path.cwd().resolve() == self.workspace.resolve()
        try:
            loaded = load_config(Path(self.config_name) if here else self.config_path, env=self.env)
        except ConfigError as exc:
            return self._config_error(exc)
        # the proxy token is a secret too (usually this run's github.token, which the runner
        # masks itself; a token of the user's own is masked here)
        secrets = set(loaded.secrets)
        if self.settings.proxy_token:
            secrets.add(self.settings.proxy_token)
        for secret in sorted(secrets):
            gh.add_mask(secret)
        self._config_warnings(loaded.warnings)
        out_dir = self.workspace / (self.settings.report_dir or loaded.config.output.dir)
        where.append(out_dir)
        # every log line and report is redacted before any cut (redaction.active)
        with redacting(Redactor(secrets)):
            return self._run_and_report(loaded, out_dir, stop)

    def _run_and_report(self, loaded: LoadedConfig, out_dir: Path, stop: Stop) -> int:
        result = self._guarded(lambda: self._execute(loaded, out_dir, stop), out_dir)
        if isinstance(result, int):
            return result
        return self._report(result, out_dir, loaded.config.output.formats)

    def _guarded(self, work: Callable[[], RunResult], out_dir: Path) -> RunResult | int:
        """``work()``, or the exit code of its error (reported, with the failed outputs)."""
        gh = self.gh
        try:
            return work()
        except ConfigError as exc:
            return self._config_error(exc)
        except FlakestormError as exc:
            level = "input" if isinstance(exc, UsageError) else "run"
            gh.error(log_line(str(exc), 4000), title=f"{TITLE}: {level} error")
            self._failed_outputs(out_dir)
            if exc.exit_code is ExitCode.INFRASTRUCTURE_ERROR:
                self._error_verdict(exc, active())  # the run's redactor (redacting, above)
            return int(exc.exit_code)
        except Exception:
            gh.log("flakestorm: internal error (a bug in flakestorm, please report it):")
            gh.untrusted(traceback.format_exc())
            gh.error(
                "internal error: this is a bug in flakestorm, please report it at "
                "https://github.com/flakestorm/flakestorm/issues with the log above",
                title=f"{TITLE}: internal error",
            )
            self._failed_outputs(out_dir)
            return int(ExitCode.INFRASTRUCTURE_ERROR)

    def _merge(self) -> int:
        """``command: merge``: the shards' results merged into the run's result, reported
        like a run (the one summary, comment and outputs)."""
        from flakestorm.engine.merge import leaving_nothing, merge, output_formats, read_shards

        paths = [self.workspace / p for p in self.settings.shard_results]
        formats: tuple[OutputFormat, ...] = ()
        out_dir = self.workspace / (self.settings.report_dir or "flakestorm-reports")

        def work() -> RunResult:
            nonlocal formats
            listed = " ".join(self.settings.shard_results)
            # the items are spooled in the report directory
            with self.gh.group(f"flakestorm merge: {listed}"), leaving_nothing(out_dir):
                shards = read_shards(paths, out_dir)
                for shard in shards:
                    self.gh.log(f"shard {shard.result.shard}: {self._relative(shard.path)}")
                formats = output_formats(shards)
                return merge(shards, self.settings.min_score)

        result = self._guarded(work, out_dir)
        if isinstance(result, int):
            return result
        return self._report(result, out_dir, formats)

    # -- steps

    def _config_error(self, exc: ConfigError) -> int:
        for problem in exc.problems:
            self.gh.error(
                f"{problem.path}: {problem.message}" if problem.path else problem.message,
                file=self.config_name,
                line=problem.line,
                title=f"{TITLE}: config error",
            )
        self._config_warnings(exc.warnings)
        return int(ExitCode.CONFIG_ERROR)

    def _config_warnings(self, warnings: Sequence[Problem]) -> None:
        for problem in warnings:
            self.gh.warning(
                f"{problem.path}: {problem.message}" if problem.path else problem.message,
                file=self.config_name,
                line=problem.line,
                title=f"{TITLE}: config warning",
            )

    def _execute(self, loaded: LoadedConfig, out_dir: Path, stop: Stop) -> RunResult:
        """Run the configured command with progress in a log group; return the result."""
        overrides = runner.Overrides(
            concurrency=self.settings.concurrency,
            seed=self.settings.seed,
            min_score=self.settings.min_score,
            output_dir=str(out_dir),
            agent_url=self.settings.agent_url,
            proxy_url=self.settings.proxy_url,
            proxy_token=self.settings.proxy_token,
            ready_timeout_ms=self.settings.ready_timeout,
            shard=self.settings.shard,
        )
        what = "every configured phase" if self.settings.command is Command.CI else "the contract"
        if self.settings.shard is not None:
            what += f", shard {self.settings.shard}"
        title = f"flakestorm {self.settings.command.value}: {what}"
        progress = _Progress(self.gh, title, self.settings.redact.public)
        with progress:
            if self.settings.command is Command.CONTRACT:
                return runner.run_contract_phase(
                    loaded, overrides, stop=stop, on_event=progress, on_notice=progress.notice
                )
            return runner.run_ci(
                loaded, overrides, stop=stop, on_event=progress, on_notice=progress.notice
            )

    def _report(
        self, result: RunResult, out_dir: Path, formats: Iterable[OutputFormat] | None
    ) -> int:
        from flakestorm.reporters import markdown

        gh = self.gh
        # judged first, then written once: every report in the directory states the step's
        # verdict (its exit code's; under fail-on: regression, with the run's own gate beside
        # it) and leads with the delta, as the summary, the comment and the outputs do
        judged = self._compare(result)
        if judged.matters:
            result = replace(result, step=judged.document(result))
        compared = delta_report.compared_of(judged)
        shown = run_verdict(result)
        written = write_reports(result, out_dir, formats)
        summary_file = written.get(OutputFormat.MARKDOWN)
        redact = self.settings.redact.public
        summary = (
            summary_file.read_text(encoding="utf-8")  # the public-safe summary, as rendered
            if summary_file is not None and redact
            else markdown.render(result, redact=redact)
        )
        gh.append_summary(summary)
        self._outputs(result, out_dir, compared, shown)
        # the log is world-readable on a public repository too
        logged = public(result).result if self.settings.redact.public else result
        if result.error is not None:  # the run could not start: why, in full, once
            self.gh.error(log_line(result.error, 4000), title=f"{TITLE}: run error")
        self._annotations(logged, shown, compared)
        self._comment(result, shown)
        self._verdict(result, shown, out_dir)
        return shown.code

    def _compare(self, result: RunResult) -> Judgement:
        """How the step judges ``result``: its ``fail-on`` rule and the delta against the base
        branch's newest successful run (``baseline: auto``), or why there is none. No baseline
        is a notice, never a failure; a baseline file that cannot be read is a config error."""
        settings = self.settings
        unjudged = Judgement(settings.fail_on)
        if settings.baseline is BaselineMode.OFF:
            return unjudged
        if result.stop_reason == "interrupted":  # cancelled: report now, nothing to compare
            self.gh.log("flakestorm: baseline: not compared (the run was cancelled)")
            return unjudged
        if result.shard is not None:  # a part of the run: the merge job compares the whole
            self.gh.log(f"flakestorm: baseline: shard {result.shard} is compared by the merge job")
            return unjudged
        if isinstance(settings.baseline, BaselineFile):
            return self._compare_blessed(result, settings.baseline)
        query = source.query_of(self.env, settings.baseline_branch, settings.baseline_artifact)
        found = (
            query if isinstance(query, source.NoBaseline) else source.find_baseline(self.gh, query)
        )
        if isinstance(found, source.Baseline) and not same_config(found.result, result):
            found = source.NoBaseline(
                f"the baseline run {found.run.id} ran {found.result.config_path}, this run "
                f"{result.config_path}: give each config its own `baseline-artifact`"
            )
        if isinstance(found, source.NoBaseline) and found.expected:
            self.gh.log(f"flakestorm: baseline: none: {log_line(found.reason, 400)}")
            return unjudged
        if isinstance(found, source.NoBaseline):
            return self._no_baseline(found.reason)
        delta = compare(found.result, result)
        judged = Judgement(
            fail_on=settings.fail_on,
            delta=_shown(delta),
            against=found.run.label,
            age=source.age_text(found.run.created_at, datetime.now(timezone.utc)),
            url=found.run.url,
            trend=None
            if isinstance(query, source.NoBaseline)
            else self._trend(query, result, found),
        )
        return self._logged(judged)

    def _trend(
        self, query: source.Query, result: RunResult, baseline: source.Baseline
    ) -> Trend | None:
        """The score over the base branch's last runs and this one (SPEC §14); None, with a
        log line, when they cannot be read."""
        history = source.find_history(self.gh, query, result.config_digest, known=baseline)
        if isinstance(history, source.NoBaseline):
            self.gh.log(f"flakestorm: trend: not shown: {log_line(history.reason, 400)}")
            return None
        trend = trend_of(history.points, result, query.branch, history.skipped)
        self.gh.log(f"flakestorm: trend: {trend.headline()}")
        return trend

    def _no_baseline(self, reason: str) -> Judgement:
        """No baseline to compare with: a notice (never a failure), saying why and what
        ``fail-on: regression`` makes of it."""
        if self.settings.fail_on is FailOn.REGRESSION:
            reason += (
                " — fail-on: regression has nothing to compare with, so no failure counts "
                "as new (only an infrastructure error fails this step)"
            )
        self.gh.notice(
            f"flakestorm: no baseline: {log_line(reason, 1500)}", title=f"{TITLE}: no baseline"
        )
        return Judgement(self.settings.fail_on, missing=reason)

    def _logged(self, judged: Judgement) -> Judgement:
        """``judged``, its comparison written to the job log first."""
        compared = delta_report.compared_of(judged)
        assert compared is not None
        for line in delta_report.terminal_lines(compared):
            self.gh.log(f"flakestorm: baseline: {line}" if not line.startswith(" ") else line)
        return judged

    def _compare_blessed(self, result: RunResult, file: BaselineFile) -> Judgement:
        """``baseline: file:PATH``: the delta against a blessed baseline committed in the
        repository. A missing file is a notice, as no baseline is; one that cannot be read as
        a blessed baseline a config error (exit 2, every report still written: SPEC §14); a
        stale one or one of another config a warning."""
        settings = self.settings
        try:
            blessed_ = blessed.load(self.workspace / file.path)
        except blessed.BaselineFileError as exc:
            reason = str(exc).replace(str(self.workspace) + "/", "")
            if isinstance(exc, blessed.MissingBaseline):
                return self._no_baseline(reason)
            self.gh.log(f"flakestorm: baseline: {log_line(reason, 1500)}")
            return Judgement(settings.fail_on, error=f"the baseline file {reason}")
        for warning in blessed_.warnings(clock.today(), result.config_digest):
            self.gh.warning(f"flakestorm: {log_line(warning, 1500)}", title=f"{TITLE}: baseline")
        delta = compare(blessed_.index, result)
        judged = Judgement(
            fail_on=settings.fail_on,
            delta=_shown(delta),
            against=blessed_.label,
            age=blessed_.age_text(clock.today(), result.config_digest),
        )
        return self._logged(judged)

    def _outputs(
        self,
        result: RunResult,
        out_dir: Path,
        compared: delta_report.Compared | None,
        shown: RunVerdict,
    ) -> None:
        contract = result.phases.get(PhaseName.CONTRACT.value)
        score = result.overall.score
        contract_score = contract.score.score if contract is not None else None
        critical = sum(len(o.score.critical_failures) for o in result.phases.values())
        self.gh.set_output("score", "" if score is None else f"{score:.2f}")
        # the step's outcome, as its exit code (fail-on: regression passes on known failures)
        self.gh.set_output("passed", "true" if shown.code == ExitCode.PASSED else "false")
        self.gh.set_output(
            "contract-score", "" if contract_score is None else f"{contract_score:.2f}"
        )
        self.gh.set_output("critical-failures", str(critical))
        self.gh.set_output("report-dir", self._relative(out_dir))
        if compared is not None:  # unset outputs read as empty
            self.gh.set_output("new-failures", str(compared.delta.new_failures))
            self.gh.set_output("fixed", str(compared.delta.fixed))

    def _failed_outputs(self, out_dir: Path) -> None:
        self.gh.set_output("passed", "false")
        self.gh.set_output("report-dir", self._relative(out_dir))

    def _annotations(
        self, result: RunResult, shown: RunVerdict, compared: delta_report.Compared | None
    ) -> None:
        """One error per failing critical invariant, on its line in the config. Under
        ``fail-on: regression`` a warning instead when each of its failing cells (or mutations)
        is a known failure (still failing against the baseline), and the new failures as the
        error."""
        regression = compared is not None and compared.fail_on is FailOn.REGRESSION
        known = frozenset(
            c.key
            for c in (compared.delta.of(Change.STILL_FAILING) if compared else ())
            if regression
        )
        annotations: list[Annotation] = []
        warnings: list[Annotation] = []
        bad = (Status.FAILED, Status.ERRORED)
        for phase, contract in result.phases.items():
            for invariant in contract.invariants:
                if invariant.severity != "critical":
                    continue
                cells = [
                    c for c in contract.cells if c.invariant_id == invariant.id and c.status in bad
                ]
                broke = [m for m in contract.mutations if invariant.id in m.failed_invariants]
                if broke:
                    broke_known = all(f"{phase}:{m.id}" in known for m in broke)
                    (warnings if broke_known else annotations).append(
                        self._mutation_annotation(invariant, broke, contract, broke_known)
                    )
                if not cells:
                    continue
                scored = sum(
                    1 for c in contract.cells if c.invariant_id == invariant.id and c.status.scored
                )
                detail = "; ".join(
                    f"{log_line(c.scenario, 60)}: {c.status.value}: {log_line(c.reason, 300)}"
                    for c in cells[:5]
                )
                more = f"; and {len(cells) - 5} more" if len(cells) > 5 else ""
                is_known = all(f"{phase}:{c.id}" in known for c in cells)
                how = " or ".join(
                    s.value for s in bad if any(c.status is s for c in cells)
                )  # errored cells are said to have errored, as in the gate's reasons
                (warnings if is_known else annotations).append(
                    Annotation(
                        f"critical invariant {log_line(invariant.id, 80)} {how} in {len(cells)} of "
                        f"{scored} scenario(s)"
                        f"{' (known: failing on the baseline too)' if is_known else ''}: "
                        f"{detail}{more}",
                        file=self.config_name,
                        line=invariant.line,
                        title=f"{TITLE}: critical invariant {log_line(invariant.id, 80)} {how}",
                    )
                )
        self.gh.annotate_all(
            Level.WARNING,
            warnings,
            lambda n: f"{n} more known critical failure(s): see the job summary",
        )
        if compared is not None and regression and shown.code == 1 and not annotations:
            new = compared.delta.of(Change.NEW_FAILURE)
            listed = ", ".join(log_line(c.cell_id, 120) for c in new[:10])
            more = f" and {len(new) - 10} more" if len(new) > 10 else ""
            annotations.append(
                Annotation(
                    f"{log_line(compared.delta.headline(compared.against), 400)}: {listed}{more}",
                    title=f"{TITLE}: new failures",
                )
            )
        if shown.error:  # the causes of the logged (public-safe) result, or the config error
            config = shown.code == ExitCode.CONFIG_ERROR  # the baseline file: no agent output
            causes = "; ".join(
                log_line(c, 400) for c in (shown.causes if config else error_causes(result))
            )
            title = f"{TITLE}: {'config error' if config else 'ERROR'}"
            annotations.insert(0, Annotation(f"exit {shown.code}: {causes}", title=title))
        elif shown.code != 0 and not annotations:
            reasons = (
                "; ".join(log_line(r, 400) for r in result.overall.reasons) or "the gate failed"
            )
            annotations.append(Annotation(reasons, title=f"{TITLE}: gate failed"))
        self.gh.annotate_all(
            Level.ERROR,
            annotations,
            lambda n: f"{n} more critical invariant(s) failed or errored: see the job summary",
        )

    def _mutation_annotation(
        self,
        invariant: InvariantInfo,
        broke: list[MutationResult],
        outcome: PhaseOutcome,
        is_known: bool,
    ) -> Annotation:
        """The annotation for a critical invariant that mutations broke, on its line
        (``is_known``: each of those mutations failed on the baseline too)."""
        detail = "; ".join(
            f"{log_line(m.id, 60)} ({log_line(m.transform, 40)}): {log_line(m.reason, 300)}"
            for m in broke[:5]
        )
        more = f"; and {len(broke) - 5} more" if len(broke) > 5 else ""
        return Annotation(
            f"critical invariant {log_line(invariant.id, 80)} failed in {len(broke)} of "
            f"{len(outcome.mutations)} mutation(s)"
            f"{' (known: failing on the baseline too)' if is_known else ''}: {detail}{more}",
            file=self.config_name,
            line=invariant.line,
            title=f"{TITLE}: critical invariant {log_line(invariant.id, 80)} failed",
        )

    def _comment(self, result: RunResult, shown: RunVerdict) -> None:
        mode = self.settings.comment
        if not mode.updates:
            return
        if result.shard is not None:
            self.gh.log(
                f"flakestorm: shard {result.shard}: no pull request comment (the merge job "
                "posts the run's one comment)"
            )
            return
        from flakestorm.reporters import comment

        key = comment.marker_key(self.config_name)

        def render(previous: str | None) -> str:
            state = comment.parse_state(previous) if previous is not None else None
            return comment.render(
                result, state, key, redact=self.settings.redact.public, shown=shown
            )

        outcome = self.gh.sticky_comment(
            comment.marker(key), render, create=mode.creates(shown.code == ExitCode.PASSED)
        )
        if outcome.action in (CommentAction.CREATED, CommentAction.UPDATED):
            where = f": {outcome.url}" if outcome.url else ""
            self.gh.log(f"flakestorm: pull request comment {outcome.action.value}{where}")

    def _error_verdict(self, exc: FlakestormError, redact: Redactor) -> None:
        """An exit-3 error before there was a result: the ERROR verdict in the log and the job
        summary (which ``::add-mask::`` does not cover: secrets are redacted here), with the
        cause."""
        from flakestorm.reporters import markdown

        message = redact(str(exc))
        self.gh.append_summary(markdown.render_error(exc.cause, message))
        line = error_verdict_line(exc.cause, message).removeprefix("Verdict: ")
        self.gh.log(f"flakestorm: {line}")

    def _verdict(self, result: RunResult, shown: RunVerdict, out_dir: Path) -> None:
        """The step's verdict line (the exit code's), the run's score, and why its own gate
        failed."""
        score = result.overall.score
        scored = "n/a" if score is None else f"{score:.2f}"
        minimum = result.overall.min_score
        verdict = verdict_line(result, shown).removeprefix("Verdict: ")
        line = f"flakestorm: {verdict}: score {scored}"
        if minimum:
            line += f" (min_score {minimum:g})"
        if not result.complete:
            line += f"; the run stopped early ({log_line(str(result.stop_reason), 40)})"
        self.gh.log(line)
        for reason in result.overall.reasons:
            self.gh.log(f"  - {log_line(reason, 400)}")
        self.gh.log(f"flakestorm: reports in {self._relative(out_dir)}")
        if result.shard is not None:
            self.gh.log(
                f"flakestorm: this is shard {result.shard} (its part of the run): a job with "
                "`command: merge` gives the run's verdict"
            )
        if result.stop_reason == "interrupted":
            self.gh.warning(
                "the run was cancelled before it finished: cells it did not finish are not_run; "
                f"the partial reports are in {self._relative(out_dir)}",
                title=f"{TITLE}: cancelled",
            )


STARTING_GROUP = "flakestorm: starting (chaos proxy, agent, readiness)"
"""The log group of what happens before the first cell: the proxy, the agent starting and,
every 10 s while it is not ready, what was tried and the last error."""


class _Progress:
    """Progress lines for the log (agent output only through :func:`safe`; with ``redact``,
    public-safe as the job summary), in collapsible groups, one open at a time (GitHub does not
    nest them): the notices before the first cell in :data:`STARTING_GROUP`, then the run's
    lines in a group titled ``run_title``. A context manager: leaving it ends the open group."""

    def __init__(self, gh: GitHub, run_title: str, redact: bool = True) -> None:
        self._gh = gh
        self._run_title = run_title
        self._redact = redact
        self._lock = threading.Lock()
        self._group: str | None = None
        self._groups = contextlib.ExitStack()

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._groups.close()

    def _in_group(self, title: str) -> None:
        if self._group != title:
            self._groups.close()
            self._groups.enter_context(self._gh.group(title))
            self._group = title

    def __call__(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, (CellFinished, ScenarioFinished)):
                self._in_group(self._run_title)
            if isinstance(event, CellFinished):
                cell = public_cell(event.result) if self._redact else event.result
                if cell.status in (Status.FAILED, Status.ERRORED):
                    self._gh.log(
                        f"  {cell.status.value.upper()} {log_line(cell.id, 120)} "
                        f"[{cell.severity}]: {log_line(cell.reason, 300)}"
                    )
            elif isinstance(event, ScenarioFinished):
                self._gh.log(scenario_line(event.name, event.results))

    def notice(self, text: str) -> None:
        with self._lock:
            if self._group is None:
                self._in_group(STARTING_GROUP)
            self._gh.log(log_line(text, 1000))


def _shown(delta: Delta) -> Delta:
    """``delta`` with only the changes a report shows."""
    return Delta(tuple(c for c in delta.changes if c.change.shown))


if __name__ == "__main__":
    try:
        code = main(os.environ)
    except Interrupted as exc:  # a second signal before the run took the signals over
        print(f"flakestorm: interrupted ({exc.name}): nothing more was done", flush=True)
        code = int(ExitCode.INFRASTRUCTURE_ERROR)
    if SIGNALS.exit_code(code) != code:
        GitHub(os.environ).error(SIGNALS.interrupted(), title=f"{TITLE}: cancelled")
    sys.exit(SIGNALS.exit_code(code))
