"""``${VAR}`` expansion in config values, and keeping the values it brings in out of messages.

Every non-empty value taken from the environment is a *secret*: :func:`expand` returns them, the
loader hands them on (``LoadedConfig.secrets``) so results and logs can be masked, and
:func:`redact` / :func:`redacted` keep them out of the loader's own messages, which are printed
before anything else could mask them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from flakestorm.errors import Problem
from flakestorm.redaction import Redactor

_ENV_RE = re.compile(r"\$\$\{|\$\{")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Expansion:
    """A string value with its variables expanded, and what the environment contributed."""

    text: str
    problems: tuple[str, ...] = ()
    """What is wrong with the references (the value is then unusable)."""
    secrets: frozenset[str] = frozenset()
    """The non-empty values taken from the environment."""
    from_env: bool = False
    """The value refers to an environment variable (set or not)."""


def expand(text: str, env: Mapping[str, str]) -> Expansion:
    """Expand ``${VAR}`` / ``${VAR:-default}`` in ``text``; ``$${`` is a literal ``${``.

    A malformed reference stops the expansion (the text is returned as written); an unset
    variable without a default is a problem and expands to nothing.
    """
    out: list[str] = []
    problems: list[str] = []
    secrets: set[str] = set()
    from_env = False
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
            problems.append("unclosed '${' (write '$${' for a literal '${')")
            return Expansion(text, tuple(problems), frozenset(secrets), from_env)
        body = text[match.end() : end]
        name, sep, default = body.partition(":-")
        if not _NAME_RE.fullmatch(name) or (not sep and ":" in body):
            problems.append(
                f"'${{{body}}}' is not a valid variable reference "
                "(expected ${NAME} or ${NAME:-default}; write '$${' for a literal '${')"
            )
            return Expansion(text, tuple(problems), frozenset(secrets), from_env)
        value = env.get(name)
        from_env = True
        if value is None or (sep and value == ""):
            if not sep:
                problems.append(
                    f"environment variable {name} is not set "
                    f"(set it, or write ${{{name}:-default}})"
                )
                value = ""
            else:
                value = default
        elif value:
            secrets.add(value)
        out.append(value)
        pos = end + 1
    out.append(text[pos:])
    return Expansion("".join(out), tuple(problems), frozenset(secrets), from_env)


def redacted(problems: list[Problem], secrets: Collection[str]) -> list[Problem]:
    """Problems whose messages quote no value that came from the environment (they are printed
    before the action can mask anything: the config did not load)."""
    if not secrets:
        return problems
    redact = Redactor(secrets)
    return [dataclasses.replace(p, message=redact(p.message)) for p in problems]
