"""Read flakestorm.yaml: YAML with line numbers, ``${VAR}`` expansion, ConfigError with file:line.

The pipeline, each step collecting every problem it finds before the next one runs::

    text ──yaml.compose──> nodes ──_Builder──> plain data + locations + secrets
         ──Config.model_validate──> Config ──semantics.check──> errors, warnings

Only this module imports ``yaml`` and sees pydantic's ``ValidationError``: both are
translated here into :class:`~flakestorm.errors.Problem` values that say where (line:col of the
offending node), what, and what would be valid. Whatever the input, the only exception that
leaves :func:`load_config_text` is :class:`~flakestorm.errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import hashlib
import inspect
import os
import re
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from flakestorm import semantics
from flakestorm.config import (
    CONTEXT_ATTACK_FIELDS,
    INVARIANT_FIELDS,
    LEGACY_WEIGHT_KEYS,
    Agent,
    Config,
    ContextAttack,
    ContextAttackType,
    Invariant,
    InvariantType,
    LangsmithSource,
    Mutations,
    Output,
    Session,
)
from flakestorm.config import Advanced as AdvancedSection
from flakestorm.config import Chaos as ChaosSection
from flakestorm.errors import ConfigError, Problem
from flakestorm.results import MIN_SECRET_CHARS

ConfigPath = tuple[str | int, ...]
Location = tuple[int, int]

MAX_NODES = 100_000
"""How many values a document may expand to (aliases included): a guard against alias bombs."""

MAX_DEPTH = 64
"""How deeply collections may nest."""


@dataclass(frozen=True)
class LoadedConfig:
    """A valid config plus what the loader learnt while reading it."""

    config: Config
    path: Path
    warnings: tuple[Problem, ...] = ()
    secrets: frozenset[str] = frozenset()
    locations: Mapping[ConfigPath, tuple[int, int]] = field(default_factory=dict)
    digest: str = ""

    @property
    def base_dir(self) -> Path:
        """The directory relative paths in the config are resolved against."""
        return self.path.parent

    def line_of(self, path: ConfigPath) -> int:
        """The 1-based line of the node at ``path`` (or of its nearest ancestor that exists)."""
        while path and path not in self.locations:
            path = path[:-1]
        return self.locations.get(path, (1, 1))[0]


def load_config(path: str | Path, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Read and validate the config file at ``path``; raise ConfigError with every problem."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError([Problem(str(p), 1, 1, "", f"cannot read the file ({reason})")]) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        msg = f"the file is not UTF-8 text (byte 0x{raw[exc.start]:02x})"
        raise ConfigError([Problem(str(p), line, col, "", msg)]) from None
    return load_config_text(text, filename=str(p), env=env, base_dir=p.parent)


def load_config_text(
    text: str,
    filename: str = "flakestorm.yaml",
    env: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> LoadedConfig:
    """Validate config ``text`` as if read from ``filename`` (relative paths: ``base_dir``)."""
    environ: Mapping[str, str] = os.environ if env is None else env
    reader = _Reader(filename, environ)
    try:
        return reader.load(text, base_dir)
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(
            [Problem(filename, 1, 1, "", "the document is nested too deeply")]
        ) from None


# --------------------------------------------------------------------------- YAML -> data


def _where(mark: Any) -> Location:
    return (mark.line + 1, mark.column + 1)


class _Fail(Exception):
    """Stops the build of a document that cannot become data (alias bomb, bad tag)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem


_ENV_RE = re.compile(r"\$\$\{|\$\{")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass
class _Document:
    """Plain data built from the YAML nodes, plus where each value and key came from."""

    data: Any = None
    values: dict[ConfigPath, Location] = field(default_factory=dict)
    keys: dict[ConfigPath, Location] = field(default_factory=dict)
    scalars: dict[ConfigPath, str] = field(default_factory=dict)
    secrets: set[str] = field(default_factory=set)
    env_paths: set[ConfigPath] = field(default_factory=set)
    problems: list[Problem] = field(default_factory=list)


class _Builder:
    """Turns a composed node tree into plain data, recording positions and expanding ``${VAR}``."""

    def __init__(self, filename: str, env: Mapping[str, str]) -> None:
        self.filename = filename
        self.env = env
        self.doc = _Document()
        self.budget = MAX_NODES
        self.active: set[int] = set()
        self.scalar_loader = yaml.SafeLoader("")

    def build(self, node: yaml.Node) -> _Document:
        self.doc.data = self.value(node, (), 0)
        return self.doc

    def problem(self, loc: Location, path: ConfigPath, message: str) -> Problem:
        return Problem(self.filename, loc[0], loc[1], format_path(path), message)

    def value(self, node: yaml.Node, path: ConfigPath, depth: int) -> Any:
        self.budget -= 1
        loc = _where(node.start_mark)
        if self.budget < 0:
            raise _Fail(
                self.problem(
                    loc,
                    (),
                    f"the document expands to more than {MAX_NODES} values "
                    "(too many aliases of large anchors?)",
                )
            )
        if depth > MAX_DEPTH:
            raise _Fail(self.problem(loc, path, f"nested more than {MAX_DEPTH} levels deep"))
        self.doc.values.setdefault(path, loc)
        if id(node) in self.active:
            raise _Fail(self.problem(loc, path, "an alias refers to the anchor that contains it"))
        if isinstance(node, yaml.MappingNode):
            self.active.add(id(node))
            try:
                return self.mapping(node, path, depth)
            finally:
                self.active.discard(id(node))
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ_TAG:
                raise _Fail(self.problem(loc, path, f"unsupported YAML tag {node.tag!r}"))
            self.active.add(id(node))
            try:
                return [
                    self.value(item, (*path, i), depth + 1) for i, item in enumerate(node.value)
                ]
            finally:
                self.active.discard(id(node))
        return self.scalar(node, path, loc)

    def scalar(self, node: yaml.Node, path: ConfigPath, loc: Location) -> Any:
        try:
            value = self.scalar_loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            raise _Fail(self.problem(loc, path, f"invalid YAML value: {problem}")) from None
        except (ValueError, TypeError, OverflowError):
            raise _Fail(self.problem(loc, path, f"invalid YAML value {node.value!r}")) from None
        if isinstance(node.value, str):
            self.doc.scalars.setdefault(path, node.value)
        if isinstance(value, str) and node.tag == _STR_TAG:
            return self.expand(value, path, loc)
        return value

    def mapping(self, node: yaml.MappingNode, path: ConfigPath, depth: int) -> dict[Any, Any]:
        loc = _where(node.start_mark)
        if node.tag != _MAP_TAG:
            raise _Fail(self.problem(loc, path, f"unsupported YAML tag {node.tag!r}"))
        out: dict[Any, Any] = {}
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.extend(self.merge_sources(value_node, path))
                continue
            key = self.key(key_node, path)
            key_loc = _where(key_node.start_mark)
            if key in out:
                first = self.doc.keys.get((*path, key), loc)
                self.doc.problems.append(
                    self.problem(
                        key_loc,
                        (*path, key),
                        f"duplicate key {key!r} (first defined at line {first[0]})",
                    )
                )
                continue
            here = (*path, key)
            self.doc.keys[here] = key_loc
            out[key] = self.value(value_node, here, depth + 1)
        for key_node, value_node in merged:
            key = self.key(key_node, path)
            if key not in out:
                self.doc.keys.setdefault((*path, key), _where(key_node.start_mark))
                out[key] = self.value(value_node, (*path, key), depth + 1)
        return out

    def merge_sources(
        self, node: yaml.Node, path: ConfigPath
    ) -> Iterator[tuple[yaml.Node, yaml.Node]]:
        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, yaml.MappingNode):
                where = _where(source.start_mark)
                raise _Fail(self.problem(where, path, "'<<' merges only mappings"))
            self.budget -= len(source.value)
            yield from source.value

    def key(self, node: yaml.Node, path: ConfigPath) -> str | int:
        loc = _where(node.start_mark)
        if not isinstance(node, yaml.ScalarNode):
            raise _Fail(self.problem(loc, path, "a mapping key must be a plain value"))
        value = self.scalar_loader.construct_object(node) if node.tag != _STR_TAG else node.value
        if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
            return str(node.value)
        return value if isinstance(value, (str, int)) else str(node.value)

    def expand(self, text: str, path: ConfigPath, loc: Location) -> str:
        """Expand ``${VAR}`` / ``${VAR:-default}``; ``$${`` is a literal ``${``."""
        if "${" not in text:
            return text
        out: list[str] = []
        pos = 0
        for match in _ENV_RE.finditer(text):
            if match.start() < pos:
                continue
            out.append(text[pos : match.start()])
            if match.group() == "$${":
                out.append("${")
                pos = match.end()
                continue
            end = text.find("}", match.end())
            if end < 0:
                self.env_problem(loc, path, "unclosed '${' (write '$${' for a literal '${')")
                return text
            body = text[match.end() : end]
            name, sep, default = body.partition(":-")
            if not _NAME_RE.fullmatch(name) or (not sep and ":" in body):
                self.env_problem(
                    loc,
                    path,
                    f"'${{{body}}}' is not a valid variable reference "
                    "(expected ${NAME} or ${NAME:-default}; write '$${' for a literal '${')",
                )
                return text
            value = self.env.get(name)
            self.doc.env_paths.add(path)
            if value is None or (sep and value == ""):
                if not sep:
                    self.env_problem(
                        loc,
                        path,
                        f"environment variable {name} is not set "
                        f"(set it, or write ${{{name}:-default}})",
                    )
                    value = ""
                else:
                    value = default
            elif value:
                self.doc.secrets.add(value)
            out.append(value)
            pos = end + 1
        out.append(text[pos:])
        return "".join(out)

    def env_problem(self, loc: Location, path: ConfigPath, message: str) -> None:
        self.doc.problems.append(self.problem(loc, path, message))


def format_path(path: Sequence[str | int]) -> str:
    """``("contract", "invariants", 0, "severity")`` -> ``contract.invariants[0].severity``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _line_col(text: str, index: int) -> Location:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _tab_in_indent(text: str, until_line: int) -> Location | None:
    for number, line in enumerate(text.splitlines()[:until_line], start=1):
        stripped = line.lstrip(" \t")
        indent = line[: len(line) - len(stripped)]
        if "\t" in indent and stripped and not stripped.startswith("#"):
            return number, indent.index("\t") + 1
    return None


def _yaml_problem(filename: str, text: str, exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.reader.ReaderError):
        line, col = _line_col(text, exc.position)
        what = f"#x{exc.character:04x}" if isinstance(exc.character, int) else repr(exc.character)
        return Problem(filename, line, col, "", f"invalid YAML: character {what} is not allowed")
    line, col = _where(mark) if mark is not None else (1, 1)
    tab = _tab_in_indent(text, line)
    if tab is not None:
        return Problem(
            filename, tab[0], tab[1], "", "tab character in indentation (indent with spaces)"
        )
    problem = getattr(exc, "problem", None) or "cannot parse"
    message = f"invalid YAML: {problem}"
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    if context and context_mark is not None:
        cl, cc = _where(context_mark)
        message += f" ({context} at line {cl}, column {cc})"
    elif context:
        message += f" ({context})"
    return Problem(filename, line, col, "", message)


# --------------------------------------------------------------------------- the reader

_FAST_LOADER: Any = getattr(yaml, "CSafeLoader", None)


def _compose(text: str) -> yaml.Node | None:
    """Compose with libyaml when available; errors always come from the pure-python parser,
    so that messages do not depend on how PyYAML was built."""
    if _FAST_LOADER is not None:
        try:
            return yaml.compose(text, Loader=_FAST_LOADER)
        except yaml.YAMLError:
            pass
    return yaml.compose(text, Loader=yaml.SafeLoader)


class _Reader:
    def __init__(self, filename: str, env: Mapping[str, str]) -> None:
        self.filename = filename
        self.env = env

    def fail(self, problems: list[Problem]) -> ConfigError:
        return ConfigError(sorted(problems, key=lambda p: (p.line, p.column)))

    def load(self, text: str, base_dir: Path | None) -> LoadedConfig:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        text = text.removeprefix("\ufeff")
        try:
            node = _compose(text)
        except yaml.YAMLError as exc:
            raise self.fail([_yaml_problem(self.filename, text, exc)]) from None
        if node is None:
            raise self.fail(
                [Problem(self.filename, 1, 1, "", "the file is empty (expected a mapping)")]
            )
        if not isinstance(node, yaml.MappingNode):
            line, col = _where(node.start_mark)
            got = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
            raise self.fail(
                [
                    Problem(
                        self.filename,
                        line,
                        col,
                        "",
                        f"expected a mapping of sections (agent:, contract:, ...), got {got}",
                    )
                ]
            )
        builder = _Builder(self.filename, self.env)
        try:
            doc = builder.build(node)
        except _Fail as fail:
            raise self.fail([*builder.doc.problems, fail.problem]) from None
        return self.validate(doc, digest, base_dir)

    def validate(self, doc: _Document, digest: str, base_dir: Path | None) -> LoadedConfig:
        where = _Where(self.filename, doc)
        problems = list(doc.problems)
        data = doc.data
        problems.extend(_precheck(data, where))
        config: Config | None = None
        try:
            config = Config.model_validate(_prepare(data))
        except ValidationError as exc:
            problems.extend(_Translator(where, data).translate(exc.errors()))
        warnings: list[Problem] = []
        if config is not None:
            errors, found = semantics.check(config, where.locate, base_dir or Path("."))
            problems.extend(errors)
            warnings.extend(found)
            warnings.extend(_version_warnings(config, data, where))
        unknown = [p.path for p in problems if p.message.startswith("unknown key")]
        problems = [
            p
            for p in problems
            if not _masked(p, doc)
            and not any(p.path.startswith(u + ".") or p.path.startswith(u + "[") for u in unknown)
        ]
        if problems or config is None:
            raise self.fail(_redacted(_dedupe(problems), doc.secrets))
        root = base_dir if base_dir is not None else Path(".")
        warnings = _redacted(_dedupe(warnings), doc.secrets)
        return LoadedConfig(
            config=config,
            path=root / Path(self.filename).name,
            warnings=tuple(sorted(warnings, key=lambda p: (p.line, p.column))),
            secrets=frozenset(doc.secrets),
            locations=dict(doc.values),
            digest=digest,
        )


REDACTED = "***"


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (as it is, and as ``repr`` escapes it) replaced by ``***``
    (values shorter than :data:`~flakestorm.results.MIN_SECRET_CHARS` are left alone)."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, REDACTED).replace(repr(secret)[1:-1], REDACTED)
    return text


def _redacted(problems: list[Problem], secrets: Iterable[str]) -> list[Problem]:
    """Problems whose messages quote no value that came from the environment (they are printed
    before the action can mask anything: the config did not load)."""
    if not secrets:
        return problems
    return [dataclasses.replace(p, message=redact(p.message, secrets)) for p in problems]


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen: set[Problem] = set()
    out = []
    for p in problems:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def _masked(problem: Problem, doc: _Document) -> bool:
    """A value whose variable was unset already has its problem: do not report it twice."""
    if "environment variable" in problem.message or "variable reference" in problem.message:
        return False
    if "'${'" in problem.message:
        return False
    return any(
        problem.path == format_path(p) or problem.path.startswith(format_path(p) + ".")
        for p in doc.env_paths
        if _had_env_problem(p, doc)
    )


def _had_env_problem(path: ConfigPath, doc: _Document) -> bool:
    shown = format_path(path)
    return any(
        p.path == shown and ("environment variable" in p.message or "'${'" in p.message)
        for p in doc.problems
    )


def _prepare(data: Any) -> Any:
    """Remove what :func:`_precheck` reported so pydantic does not report it again."""
    if not isinstance(data, dict):
        return data
    scoring = data.get("scoring")
    if isinstance(scoring, dict):
        scoring = {k: v for k, v in scoring.items() if k != "legacy_form"}
        if "weights" in scoring:
            scoring = {k: v for k, v in scoring.items() if k not in LEGACY_WEIGHT_KEYS}
        data = {**data, "scoring": scoring}
    return data


class _Where:
    """Maps config paths to YAML positions and builds Problems."""

    def __init__(self, filename: str, doc: _Document) -> None:
        self.filename = filename
        self.doc = doc

    def yaml_path(self, path: ConfigPath) -> ConfigPath:
        """The YAML path of a config path (dict-form context attacks, flat scoring)."""
        out: list[str | int] = []
        node: Any = self.doc.data
        i = 0
        while i < len(path):
            part = path[i]
            if (
                part == "weights"
                and out == ["scoring"]
                and isinstance(node, dict)
                and "weights" not in node
            ):
                i += 1
                continue
            if isinstance(part, int) and isinstance(node, dict):
                keys = list(node)
                if 0 <= part < len(keys):
                    out.append(keys[part])
                    node = node[keys[part]]
                    if i + 1 < len(path) and path[i + 1] == "type":
                        return tuple(out)  # the key is the type
                    i += 1
                    continue
                return tuple(out)
            if part == "json_schema":
                part = "schema"
            out.append(part)
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                node = None
            i += 1
        return tuple(out)

    def position(self, ypath: ConfigPath, key: bool = False) -> Location:
        if key and ypath in self.doc.keys:
            return self.doc.keys[ypath]
        path = ypath
        while path and path not in self.doc.values:
            path = path[:-1]
        return self.doc.values.get(path, (1, 1))

    def at(self, ypath: ConfigPath, message: str, key: bool = False) -> Problem:
        line, col = self.position(ypath, key)
        return Problem(self.filename, line, col, format_path(ypath), message)

    def locate(self, path: ConfigPath, message: str, key: bool = False) -> Problem:
        """The Problem for ``message`` about the config value at ``path`` (semantics' hook)."""
        return self.at(self.yaml_path(path), message, key)


# --------------------------------------------------------------------------- pre-checks


def _precheck(data: Any, where: _Where) -> list[Problem]:
    problems: list[Problem] = []
    if not isinstance(data, dict):
        return problems
    scoring = data.get("scoring")
    if isinstance(scoring, dict):
        if "legacy_form" in scoring:
            problems.append(
                where.at(
                    ("scoring", "legacy_form"),
                    _unknown_key_message("legacy_form", _scoring_keys()),
                    key=True,
                )
            )
        flat = [k for k in LEGACY_WEIGHT_KEYS if k in scoring]
        if flat and "weights" in scoring:
            problems.append(
                where.at(
                    ("scoring", flat[0]),
                    f"both the flat form ({', '.join(flat)}) and 'weights' are set; "
                    "keep only 'weights:' (mutation, chaos, contract, replay)",
                    key=True,
                )
            )
    return problems


def _scoring_keys() -> list[str]:
    return ["weights", "min_score"]


def _version_warnings(config: Config, data: Any, where: _Where) -> list[Problem]:
    out = []
    if config.version == "1.0":
        out.append(
            where.at(
                ("version",),
                "version 1.0 configs are read as 2.0: chaos, contract, replays and "
                "scoring.weights are available, 'model:' is replaced by mutations.llm and "
                "output uses 'dir' and 'formats' (write version: \"2.0\")",
            )
        )
    if config.scoring.legacy_form:
        w = config.scoring.weights
        out.append(
            where.at(
                ("scoring",),
                "the flat scoring form is deprecated; write scoring: weights: {mutation: "
                f"{w.mutation:g}, chaos: {w.chaos:g}, contract: {w.contract:g}, "
                f"replay: {w.replay:g}}}",
            )
        )
    return out


# --------------------------------------------------------------------------- pydantic errors

_UNION_TYPE_TAGS = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "none": "nothing",
}

# Keys of the public flakestorm 1.x / 2.0.0 format that this version does not read.
_UPSTREAM_KEYS: dict[tuple[type[BaseModel], str], str] = {
    (Config, "model"): (
        "the 'model' section is not read any more: configure the mutation LLM under "
        "mutations.llm {base_url, model, api_key} and set mutations.generator: llm "
        "(any OpenAI-compatible API; Ollama serves one at http://localhost:11434/v1)"
    ),
    (Output, "format"): "use 'formats:' with a list of junit, markdown, json, html",
    (Output, "path"): "use 'dir:' for the report directory",
    (Output, "filename_template"): "report file names are fixed; remove 'filename_template'",
    (AdvancedSection, "retries"): (
        "invocations are not retried; for a flaky agent use advanced.repeat and advanced.min_pass"
    ),
    (Agent, "query_params"): "put query parameters in agent.endpoint itself",
    (Agent, "parse_structured_input"): (
        "structured golden prompts are not parsed; request_template substitutes {prompt} only"
    ),
    (Mutations, "custom_templates"): (
        "use 'templates:' (a list of strings, each containing {prompt}) and add 'custom' "
        "to mutations.types"
    ),
    (Invariant, "dangerous_prompts"): (
        "use 'expect: refuse' (or 'expect: comply') on a refusal_check invariant"
    ),
    (Session, "source"): "remove 'source' (it is not read; the session's origin is not needed)",
    (LangsmithSource, "filter"): (
        "LangSmith filters are not supported; give 'project' or 'run_id' (and 'contract')"
    ),
    (LangsmithSource, "auto_import"): (
        "remove 'auto_import': LangSmith sources are imported on every run"
    ),
}

_UPSTREAM_VALUES: dict[tuple[type[BaseModel], str, str], str] = {
    (Agent, "type", "langchain"): (
        "'langchain' is not supported: use type: python with endpoint "
        "'module:attr' of a function that invokes the chain"
    ),
    (LangsmithSource, "type", "langsmith_run"): (
        "'langsmith_run' is not supported: use type: langsmith with run_id: <the run id>"
    ),
}


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "an empty string" if value == "" else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, bytes):
        return "binary data"
    return f"a {type(value).__name__}"


def _show(value: Any) -> str:
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return repr(text)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return repr(value)
    return _kind(value)


def _did_you_mean(word: str, choices: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not found:
        lowered = {c.lower(): c for c in choices}
        if word.lower() in lowered:
            return lowered[word.lower()]
    return found[0] if found else None


def _unknown_key_message(key: str, valid: Sequence[str]) -> str:
    guess = _did_you_mean(str(key), valid)
    hint = f"did you mean {guess!r}?; " if guess else ""
    return f"unknown key {key!r} ({hint}valid keys: {', '.join(valid)})"


def _unwrap(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> list[Any]:
    annotation = _unwrap(annotation)
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return [_unwrap(a) for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _field_names(model: type[BaseModel]) -> list[str]:
    """The YAML keys of ``model``: its own fields first, then inherited ones."""
    own = inspect.get_annotations(model)
    fields = sorted(model.model_fields.items(), key=lambda item: item[0] not in own)
    return [info.alias or name for name, info in fields if name != "legacy_form"]


def _field(model: type[BaseModel], name: str) -> Any:
    for fname, info in model.model_fields.items():
        if name in (fname, info.alias):
            return info.annotation
    return None


def _is_model(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, BaseModel)


class _Step:
    """One loc element of a pydantic error, resolved against the data and the model."""

    def __init__(self) -> None:
        self.ypath: list[str | int] = []
        self.cpath: list[str | int] = []
        self.models: list[type[BaseModel] | None] = []
        self.tags: list[tuple[int, str]] = []  # (index in ypath, union member tag)
        self.on_key = False
        self.data: Any = None
        self.model: type[BaseModel] | None = None
        self.annotation: Any = None


class _Translator:
    """Turns pydantic error dicts into Problems about YAML nodes."""

    def __init__(self, where: _Where, data: Any) -> None:
        self.where = where
        self.data = data

    def walk(self, loc: tuple[str | int, ...], etype: str) -> _Step:
        step = _Step()
        node: Any = self.data
        ann: Any = Config
        elems = list(loc)
        last = len(elems) - 1
        i = 0
        while i < len(elems):
            part = elems[i]
            members = _members(ann)
            model = next((m for m in members if _is_model(m)), None)
            if isinstance(part, str) and part == "[key]":
                step.on_key = True
                i += 1
                continue
            # union member tags
            if isinstance(part, str) and len(members) > 1:
                picked = [m for m in members if getattr(m, "__name__", None) == part]
                if picked or part in _UNION_TYPE_TAGS or "[" in part:
                    step.tags.append((len(step.ypath), part))
                    ann = picked[0] if picked else ann
                    i += 1
                    continue
            if isinstance(part, str) and part.startswith("function-"):
                i += 1
                continue
            if _is_model(ann) or model is not None:
                cls = ann if _is_model(ann) else model
                assert cls is not None
                step.model = cls
                if isinstance(part, str):
                    if (
                        part == "weights"
                        and step.ypath == ["scoring"]
                        and isinstance(node, dict)
                        and "weights" not in node
                    ):
                        step.cpath.append(part)
                        ann = _field(cls, part)
                        i += 1
                        continue
                    step.ypath.append("schema" if part == "json_schema" else part)
                    step.cpath.append(part)
                    step.models.append(cls)
                    ann = _field(cls, part)
                    node = node.get(part) if isinstance(node, dict) else None
                    i += 1
                    continue
            origin = typing.get_origin(_unwrap(ann))
            args = typing.get_args(_unwrap(ann))
            if origin is list:
                ann = args[0] if args else Any
                if isinstance(part, int):
                    step.cpath.append(part)
                    if isinstance(node, dict):
                        keys = list(node)
                        if 0 <= part < len(keys):
                            step.ypath.append(keys[part])
                            node = node[keys[part]]
                            step.models.append(None)
                            if i < last and elems[i + 1] == "type":
                                step.on_key = True
                                i += 2
                                ann = _unwrap(ann)
                                step.model = ann if _is_model(ann) else None
                                continue
                            if i < last and elems[i + 1] == "_":
                                step.model = ContextAttack
                                step.ypath.append("_")
                                step.data = node
                                return step
                        i += 1
                        continue
                    step.ypath.append(part)
                    step.models.append(None)
                    node = node[part] if isinstance(node, list) and part < len(node) else None
                i += 1
                continue
            if origin is dict:
                ann = args[1] if len(args) > 1 else Any
                step.ypath.append(part)
                step.cpath.append(part)
                step.models.append(None)
                node = node.get(part) if isinstance(node, dict) else None
                i += 1
                continue
            # Any or scalar: keep going by data
            step.ypath.append(part)
            step.cpath.append(part)
            step.models.append(None)
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and part < len(node):
                node = node[part]
            else:
                node = None
            ann = Any
            i += 1
        step.data = node
        step.annotation = ann
        if etype in ("missing", "extra_forbidden") and step.models:
            step.model = step.models[-1]
        return step

    def translate(self, errors: Sequence[Any]) -> list[Problem]:
        walked = [(e, self.walk(tuple(e["loc"]), e["type"])) for e in errors]
        # group union errors by the node the union is on
        groups: dict[ConfigPath, list[tuple[Any, _Step]]] = {}
        plain: list[tuple[Any, _Step]] = []
        for err, step in walked:
            if step.tags:
                groups.setdefault(tuple(step.ypath[: step.tags[0][0]]), []).append((err, step))
            else:
                plain.append((err, step))
        for node_path, members in groups.items():
            plain.extend(self.collapse(node_path, members))
        problems: list[Problem] = []
        guessed = self.misspelt(plain)
        for err, step in plain:
            if err["type"] == "missing" and tuple(step.ypath) in guessed:
                continue
            problem = self.problem(err, step)
            if problem is not None:
                problems.append(problem)
        return problems

    def misspelt(self, errors: list[tuple[Any, _Step]]) -> set[ConfigPath]:
        """Paths of missing fields that an unknown key beside them is a misspelling of."""
        out = set()
        for err, step in errors:
            if err["type"] == "extra_forbidden" and step.ypath:
                parent = tuple(step.ypath[:-1])
                guess = _did_you_mean(str(step.ypath[-1]), self.valid_keys(step.model, parent))
                if guess is not None:
                    out.add((*parent, guess))
        return out

    def collapse(
        self, node_path: ConfigPath, members: list[tuple[Any, _Step]]
    ) -> list[tuple[Any, _Step]]:
        by_tag: dict[str, list[tuple[Any, _Step]]] = {}
        for err, step in members:
            by_tag.setdefault(step.tags[0][1], []).append((err, step))
        model_tags = [t for t in by_tag if t not in _UNION_TYPE_TAGS and "[" not in t]
        value = self.value_at(node_path)
        if isinstance(value, dict) and model_tags:
            best = min(model_tags, key=lambda t: len(by_tag[t]))
            return [(e, self.untag(s)) for e, s in by_tag[best]]
        # a value of none of the union's types
        kinds = []
        for tag in by_tag:
            if tag in _UNION_TYPE_TAGS:
                kinds.append(_UNION_TYPE_TAGS[tag])
            elif tag.startswith("dict[") or tag in model_tags:
                kinds.append("a mapping")
            elif tag.startswith("list["):
                kinds.append("a list")
        kinds = list(dict.fromkeys(kinds))
        expected = ", ".join(kinds[:-1]) + " or " + kinds[-1] if len(kinds) > 1 else kinds[0]
        err, step = members[0]
        step = self.untag(step)
        step.ypath = list(node_path)
        fake = {"type": "_union", "msg": f"expected {expected}, got {_kind(value)}"}
        return [(fake, step)]

    @staticmethod
    def untag(step: _Step) -> _Step:
        step.tags = []
        return step

    def value_at(self, ypath: Sequence[str | int]) -> Any:
        node: Any = self.data
        for part in ypath:
            if isinstance(node, dict):
                node = node.get(part)
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                return None
        return node

    def problem(self, err: Any, step: _Step) -> Problem | None:
        etype: str = err["type"]
        ypath = tuple(step.ypath)
        ctx = err.get("ctx") or {}
        if etype == "_union":
            return self.where.at(ypath, err["msg"])
        if etype == "missing":
            parent = ypath[:-1]
            name = ypath[-1] if ypath else ""
            return self.where.at(parent, f"missing required field {name!r}")
        if etype == "extra_forbidden":
            return self.unknown_key(step, ypath)
        value = self.value_at(ypath)
        if isinstance(value, str):  # quoted below: never the value of an environment variable
            value = redact(value, self.where.doc.secrets)
        if step.on_key:
            return self.on_key(err, step, ypath)
        message = self.message(etype, err, ctx, value, step, ypath)
        return self.where.at(ypath, message)

    def unknown_key(self, step: _Step, ypath: ConfigPath) -> Problem:
        key = ypath[-1] if ypath else ""
        parent = ypath[:-1]
        model = step.model
        if model is not None and (model, str(key)) in _UPSTREAM_KEYS:
            text = f"unknown key {key!r}: {_UPSTREAM_KEYS[(model, str(key))]}"
            return self.where.at(ypath, text, key=True)
        if model is ContextAttack and key == "_":
            value = self.value_at(parent)
            attack = parent[-1] if parent else "the attack"
            return self.where.at(
                parent, f"expected a mapping of {attack}'s fields, got {_kind(value)}"
            )
        valid = self.valid_keys(model, parent)
        return self.where.at(ypath, _unknown_key_message(str(key), valid), key=True)

    def valid_keys(self, model: type[BaseModel] | None, parent: ConfigPath) -> list[str]:
        if model is None:
            return []
        names = _field_names(model)
        data = self.value_at(parent)
        if issubclass(model, Invariant) and isinstance(data, dict):
            itype = _enum_value(InvariantType, data.get("type"))
            if itype is not None:
                req, opt = INVARIANT_FIELDS[itype]
                common = [n for n in names if n not in _INVARIANT_TYPE_FIELDS]
                names = [*common, *req, *opt]
        if issubclass(model, ContextAttack):
            kind = None
            head = ["type"]
            if isinstance(data, dict):
                kind = _enum_value(ContextAttackType, data.get("type"))
            if kind is None and parent:
                kind = _enum_value(ContextAttackType, parent[-1])
                head = []
            if kind is not None:
                req, opt = CONTEXT_ATTACK_FIELDS[kind]
                names = [*head, *req, *opt]
        return names

    def on_key(self, err: Any, step: _Step, ypath: ConfigPath) -> Problem:
        key = ypath[-1] if ypath else ""
        ctx = err.get("ctx") or {}
        choices = _expected_choices(ctx.get("expected", ""))
        guess = _did_you_mean(str(key), choices)
        hint = f"; did you mean {guess!r}?" if guess else ""
        what = "context attack" if step.model is ContextAttack else "key"
        text = f"{what} {_show(key)} is not valid (expected one of: {', '.join(choices)}{hint})"
        return self.where.at(ypath, text, key=True)

    def message(
        self,
        etype: str,
        err: Any,
        ctx: Mapping[str, Any],
        value: Any,
        step: _Step,
        ypath: ConfigPath,
    ) -> str:
        name = str(ypath[-1]) if ypath else ""
        quote = self.quote_hint(ypath, value)
        if etype in ("enum", "literal_error"):
            special = (
                _UPSTREAM_VALUES.get((step.model, name, value))
                if step.model is not None and isinstance(value, str)
                else None
            )
            if special:
                return special
            choices = _expected_choices(str(ctx.get("expected", "")))
            guess = _did_you_mean(value, choices) if isinstance(value, str) else None
            hint = f"; did you mean {guess!r}?" if guess else ""
            return f"{_show(value)} is not valid (expected one of: {', '.join(choices)}{hint})"
        if etype == "string_type":
            return f"expected a string, got {_kind(value)}{quote}"
        if etype in ("int_type", "int_parsing", "int_from_float"):
            return f"expected an integer, got {_describe(value)}"
        if etype in ("float_type", "float_parsing", "finite_number"):
            return f"expected a number, got {_describe(value)}"
        if etype in ("bool_type", "bool_parsing"):
            return f"expected true or false, got {_describe(value)}"
        if etype in ("list_type", "tuple_type", "set_type"):
            return f"expected a list, got {_kind(value)}"
        if etype in ("dict_type", "model_type", "model_attributes_type", "mapping_type"):
            return f"expected a mapping, got {_kind(value)}"
        if etype == "too_short":
            if isinstance(value, (list, dict)):
                n = ctx.get("min_length", 1)
                return f"expected at least {n} item{'s' if n != 1 else ''}, got none"
            return "must not be empty"
        if etype == "string_too_short":
            return "must not be empty"
        if etype in ("too_long", "string_too_long"):
            return f"too long (at most {ctx.get('max_length')})"
        bounds = {
            "greater_than": ("greater than", "gt"),
            "greater_than_equal": ("at least", "ge"),
            "less_than": ("less than", "lt"),
            "less_than_equal": ("at most", "le"),
        }
        if etype in bounds:
            words, key = bounds[etype]
            return f"must be {words} {ctx.get(key)}, got {_show(value)}"
        if etype == "string_pattern_mismatch":
            return (
                f"{_show(value)} is not a python reference "
                "(expected module:attr, e.g. myagent.tools:search)"
            )
        if etype == "value_error":
            return str(err.get("msg", "")).removeprefix("Value error, ")
        msg = str(err.get("msg", "invalid value"))
        return msg.replace("Input should be", "expected").replace("Input", "value")

    def quote_hint(self, ypath: ConfigPath, value: Any) -> str:
        text = self.where.doc.scalars.get(ypath)
        if text is None or isinstance(value, (str, list, dict)) or value is None:
            return ""
        return f" (write '{text}' in quotes if you mean the text)"


_INVARIANT_TYPE_FIELDS = frozenset(
    f for req, opt in INVARIANT_FIELDS.values() for f in (*req, *opt)
)

_E = typing.TypeVar("_E", bound=enum.Enum)


def _enum_value(kind: type[_E], value: Any) -> _E | None:
    try:
        return kind(value)
    except (ValueError, TypeError):
        return None


def _expected_choices(expected: str) -> list[str]:
    return re.findall(r"'([^']*)'", expected)


def _describe(value: Any) -> str:
    if isinstance(value, (str, list, dict)) or value is None:
        return _kind(value) + (f" {_show(value)}" if isinstance(value, str) and value else "")
    return f"{_kind(value)} {_show(value)}"


# --------------------------------------------------------------------------- chaos profiles

PROFILES = (
    "api_outage",
    "degraded_llm",
    "hostile_tools",
    "high_latency",
    "cascading_failure",
    "indirect_injection",
    "model_version_drift",
)
"""The built-in chaos profiles (``--chaos-profile NAME``), shipped as YAML in the package."""


def profile_text(name: str) -> str:
    """The YAML of a built-in chaos profile (raises ``UsageError`` for an unknown name)."""
    from importlib import resources

    from flakestorm.errors import UsageError

    if name not in PROFILES:
        hint = _did_you_mean(name, PROFILES)
        raise UsageError(
            f"unknown chaos profile {name!r} (valid: {', '.join(PROFILES)}"
            + (f"; did you mean {hint!r}?" if hint else "")
            + ")"
        )
    return resources.files("flakestorm.chaos").joinpath(f"profiles/{name}.yaml").read_text()


def load_profile(name: str) -> ChaosSection:
    """A built-in chaos profile as the ``chaos`` section it stands for."""
    text = profile_text(name)
    try:
        return ChaosSection.model_validate(yaml.safe_load(text))
    except (yaml.YAMLError, ValidationError) as exc:  # a packaging bug, not a user error
        raise RuntimeError(f"built-in chaos profile {name!r} is invalid: {exc}") from None
