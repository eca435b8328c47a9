"""The sessions a config replays, resolved and checked (SPEC §7).

:func:`resolve_sessions` gathers ``replays.sessions`` — inline, ``file:`` (YAML or JSON) and
globs — in config order, resolves each session's contract (a contract name in the config, a
contract file, or the config's contract by default; the config's top-level invariants for
``verify: invariants``), and checks what the models cannot:

- there is a session to replay (or a source to import them from), and a file holds one;
- session ids are unique (across files too);
- the contract resolves;
- every recorded tool is one the agent can call through flakestorm: for a python agent, an
  ``agent.tools`` or ``proxy.tools`` name (unless a ``tool_registry`` names them at run time);
  for an http agent with ``proxy.tools`` (and no ``proxy.mcp``, whose tools are known only at
  run time), one of those;
- a python agent has something to serve recorded replies through (``agent.tools`` /
  ``agent.tool_registry`` / ``proxy.tools``, ``agent.llm``);

Every problem is located: in ``flakestorm.yaml`` (through the loader's ``locate``) or in the
session or contract file it is in. These checks are registered with the config's meaning
checks (:data:`flakestorm.meaning.CHECKS`, at the end of this module), so they run whenever
the sections they read validated, whatever else is wrong in the file; the replay phase resolves
its sessions with them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from flakestorm import meaning
from flakestorm.config import (
    AgentType,
    Config,
    Contract,
    Scenario,
    Session,
    SessionFile,
    ToolResponse,
    Verify,
)
from flakestorm.errors import Problem
from flakestorm.loader.sessions import (
    Place,
    SessionSource,
    is_glob,
    read_contract,
    read_sessions,
    session_paths,
)
from flakestorm.structure.paths import ConfigPath
from flakestorm.structure.wording import did_you_mean

Locate = Callable[[ConfigPath, str], Problem]
TOP_LEVEL = "invariants"
"""The name of the contract a ``verify: invariants`` session is checked with."""


@dataclass(frozen=True)
class ReplaySession:
    """One session to replay, with its contract resolved; ``index`` is its stable place in
    the config (sharding deals sessions by it)."""

    index: int
    session: Session
    contract: Contract
    line: int
    """The line of its entry in the config (inline, or the ``file:`` that names its file)."""

    @property
    def id(self) -> str:
        return self.session.id


def resolve_sessions(
    config: Config, base_dir: Path, locate: Locate, warnings: list[Problem] | None = None
) -> tuple[list[ReplaySession], list[Problem]]:
    """The config's sessions in order, and every problem with them (see the module doc);
    ``warnings`` gets what may be right at run time (a python agent's tool that only a
    framework object named in ``agent.tools`` may hold)."""
    replays = config.replays
    if replays is None:
        return [], []
    problems: list[Problem] = []
    sources: list[SessionSource] = []
    for i, entry in enumerate(replays.sessions):
        at: ConfigPath = ("replays", "sessions", i)
        if isinstance(entry, SessionFile):
            paths = session_paths(entry.file, base_dir)
            if not paths:
                what = "matches no file" if is_glob(entry.file) else "does not exist"
                why = "paths are relative to the config's directory"
                if not is_glob(entry.file) and (base_dir / entry.file).is_dir():
                    glob = f"{entry.file.rstrip('/')}/*.yaml"
                    what, why = "is a directory", f"name a file, or a glob such as {glob!r}"
                problems.append(
                    locate((*at, "file"), f"session file {entry.file!r} {what} ({why})")
                )
            entry_line = locate(at, "").line
            for path in paths:
                found, bad = read_sessions(path)
                # reports point at the config's entry (annotations are on flakestorm.yaml)
                sources += [dataclasses.replace(f, line=entry_line) for f in found]
                problems += bad
        else:
            sources.append(SessionSource(entry, _under(locate, at), locate(at, "").line))
    if not replays.sessions and not replays.sources:
        problems.append(
            locate(
                ("replays", "sessions"),
                "lists no session (add one inline with id: and input:, or a file: with a path "
                "or a glob)",
            )
        )
    checker = _Checker(config, base_dir)
    for i, langsmith in enumerate(replays.sources):
        at = ("replays", "sources", i)
        if langsmith.project is None and langsmith.run_id is None:
            problems.append(locate(at, "a langsmith source needs 'project' or 'run_id'"))
        checker.contract_named(langsmith.contract, _under(locate, at), problems)
    out: list[ReplaySession] = []
    seen: set[str] = set()
    for source in sources:
        session = source.session
        if session.id in seen:
            problems.append(source.place(("id",), f"duplicate session id {session.id!r}"))
        seen.add(session.id)
        problems += checker.tools(source)
        contract = checker.contract(source, problems)
        if contract is not None:
            out.append(ReplaySession(len(out), session, contract, source.line))
    if warnings is not None:
        warnings += checker.warnings
    return out, problems


def resolve_imported(
    config: Config,
    base_dir: Path,
    locate: Locate,
    source_index: int,
    sessions: Sequence[Session],
    taken: Sequence[ReplaySession],
) -> tuple[list[ReplaySession], list[Problem]]:
    """Sessions imported at run time for ``replays.sources[source_index]``, numbered after
    ``taken`` (the sessions before them), with their contracts resolved; problems are located
    at the source."""
    place = _under(locate, ("replays", "sources", source_index))
    checker = _Checker(config, base_dir)
    problems: list[Problem] = []
    seen = {s.id for s in taken}
    out: list[ReplaySession] = []
    line = locate(("replays", "sources", source_index), "").line
    for session in sessions:
        if session.id in seen:
            problems.append(place((), f"imported session {session.id!r} repeats a session id"))
        seen.add(session.id)
        source = SessionSource(session, place, line)
        problems += checker.tools(source)
        contract = checker.contract(source, problems)
        if contract is not None:
            out.append(ReplaySession(len(taken) + len(out), session, contract, line))
    return out, problems


def _under(locate: Locate, prefix: ConfigPath) -> Callable[[ConfigPath, str], Problem]:
    def place(path: ConfigPath, message: str) -> Problem:
        return locate((*prefix, *path), message)

    return place


class _Checker:
    def __init__(self, config: Config, base_dir: Path) -> None:
        self.config = config
        self.base_dir = base_dir
        self.contracts: dict[Path, Contract | None] = {}
        self.warnings: list[Problem] = []

    def contract(self, source: SessionSource, problems: list[Problem]) -> Contract | None:
        session = source.session
        if session.verify is Verify.INVARIANTS:
            if session.contract is not None:
                problems.append(
                    source.place(
                        ("contract",),
                        "verify: invariants checks the config's top-level invariants, not a "
                        "contract: remove one of the two",
                    )
                )
                return None
            return self.top_level()
        return self.contract_named(session.contract, source.place, problems)

    def top_level(self) -> Contract:
        """The config's top-level invariants as the contract of a session (``verify:
        invariants``): what the mutation phase checks a reply against."""
        return Contract(
            name=TOP_LEVEL,
            invariants=self.config.top_level_invariants(),
            chaos_matrix=[Scenario(name="replay")],
        )

    def contract_named(
        self, name: str | None, place: Place, problems: list[Problem]
    ) -> Contract | None:
        own = self.config.contract
        if name is None:
            if own is None:
                problems.append(
                    place(
                        ("contract",),
                        "no contract to verify the session against: set 'contract' (a "
                        "contract name or file) or add a contract section to the config",
                    )
                )
            return own
        if own is not None and name == own.name:
            return own
        path = self.base_dir / name
        if not path.is_file():
            known = f"the config's contract is {own.name!r}" if own else "the config has none"
            problems.append(
                place(
                    ("contract",),
                    f"{name!r} is neither the config's contract nor a contract file ({known}; "
                    "a file path is relative to the config's directory)",
                )
            )
            return None
        if path not in self.contracts:
            contract, in_file, bad = read_contract(path)
            self.contracts[path] = contract
            problems += bad
            if contract is not None and in_file is not None:
                problems += self.meaning(contract, in_file)
        return self.contracts[path]

    def meaning(self, contract: Contract, place: Place) -> list[Problem]:
        """The meaning checks of a contract file's contract (regexes, type fields, ids),
        as :mod:`flakestorm.meaning` makes them for the config's own contract."""
        # without replays: the replay check itself must not read this contract file again
        config = self.config.model_copy(update={"contract": contract, "replays": None})

        kept: list[Problem] = []

        def locate(path: ConfigPath, message: str, key: bool = False) -> Problem:
            problem = place(path[1:], message)
            if path[:1] == ("contract",):  # the rest is the config's, reported for it
                kept.append(problem)
            return problem

        meaning.check(meaning.Parts.of_config(config), locate, self.base_dir)
        return kept

    def shape(self, source: SessionSource) -> list[Problem]:
        """A session is one input, or a conversation's turns, each with its own responses."""
        session = source.session
        if session.turns is None:
            if not session.input:
                return [source.place(("input",), "a session needs an input, or turns")]
            return []
        given = [k for k in ("input", "tool_responses", "llm_responses") if getattr(session, k)]
        return [
            source.place(
                (key,),
                f"a conversation session records {key} per turn: move it into its turn "
                "(turns[N].input, turns[N].tool_responses, turns[N].llm_responses)",
            )
            for key in given
        ]

    def tools(self, source: SessionSource) -> list[Problem]:
        agent = self.config.agent
        session = source.session
        out = self.shape(source)
        recorded: list[tuple[ConfigPath, list[ToolResponse]]] = [
            (("tool_responses",), session.tool_responses)
        ] + [
            (("turns", k, "tool_responses"), turn.tool_responses)
            for k, turn in enumerate(session.turns or ())
        ]
        if agent.type is AgentType.PYTHON:
            if session.has_llm_replies and agent.llm is None:
                out.append(
                    source.place(
                        ("llm_responses",),
                        "the python agent names no agent.llm callable to serve recorded "
                        "LLM replies through: set agent.llm",
                    )
                )
            if agent.tool_registry is not None:
                return out
            known = [ref.rpartition(":")[2].rpartition(".")[2] for ref in agent.tools or ()]
            # a tool whose HTTP calls are routed through the in-process proxy (SPEC §10), and
            # a downstream A2A agent's (SPEC §17)
            proxy = self.config.proxy
            known += sorted([*proxy.tools, *proxy.a2a]) if proxy else []
            if session.all_tool_responses and not known:
                out.append(
                    source.place(
                        ("tool_responses",),
                        "the python agent names no agent.tools, agent.tool_registry, "
                        "proxy.tools or proxy.a2a to serve recorded tool responses through",
                    )
                )
                return out
        else:
            proxy = self.config.proxy
            known = sorted([*proxy.tools, *proxy.a2a]) if proxy else []
            if not known:
                return out  # the agent calls <proxy>/tools/NAME itself: any name routes
            if self.config.proxy is not None and self.config.proxy.mcp:
                return out  # an MCP server's tools are known only at run time
        for at, responses in recorded:
            for j, response in enumerate(responses):
                if response.tool in known:
                    continue
                guess = did_you_mean(response.tool, known)
                hint = f"; did you mean {guess!r}?" if guess else ""
                where = "agent.tools" if agent.type is AgentType.PYTHON else "proxy.tools"
                if agent.type is not AgentType.PYTHON and proxy is not None and proxy.a2a:
                    where += " and proxy.a2a"
                problem = source.place(
                    (*at, j, "tool"),
                    f"unknown tool {response.tool!r} (the tools in {where}: "
                    f"{', '.join(known)}){hint}",
                )
                if agent.type is AgentType.PYTHON:
                    # a framework object named whole (module:agent) holds tools by their own
                    # names, known only once it is imported (SPEC §10): a miss then, not here
                    self.warnings.append(
                        dataclasses.replace(
                            problem,
                            message=problem.message
                            + "; fine if a framework object named in agent.tools holds it "
                            "(else its calls are replay misses)",
                        )
                    )
                else:
                    out.append(problem)
        return out


def check_replays(scope: meaning.Scope) -> None:
    """The replay sessions' checks, as a meaning check of the config (reads the sections that
    :func:`resolve_sessions` does)."""
    config = scope.parts.config()
    found = resolve_sessions(config, scope.base_dir, scope.locate, scope.found.warnings)
    scope.found.errors.extend(found[1])


meaning.register(
    meaning.Check("replay sessions", ("agent", "contract", "proxy", "replays"), check_replays)
)
