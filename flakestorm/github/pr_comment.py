"""The sticky pull request comment, as data: which comment is the run's, what its body becomes,
and whether the step writes one at all.

One comment per pull request and config holds the marker of :mod:`flakestorm.reporters.comment`
(its body is rendered there). :func:`sticky_of` says what the step posts, or why it posts
nothing; :func:`marked` finds the comment among a page of them; :func:`sticky_body` makes sure
the marker stays in a body that fits GitHub's limit; :func:`outcome_note` is the log line of
what happened. The REST calls are :meth:`flakestorm.github.client.GitHub.sticky_comment`'s.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flakestorm.github.notes import Note

if TYPE_CHECKING:
    from flakestorm.github.settings import Settings
    from flakestorm.reporters.view import RunVerdict
    from flakestorm.results.model import RunResult

__all__ = [
    "COMMENT_LIMIT",
    "Comment",
    "CommentAction",
    "CommentOutcome",
    "Sticky",
    "marked",
    "outcome_note",
    "sticky_body",
    "sticky_of",
]

COMMENT_LIMIT = 65_536
"""Characters a PR comment body may have."""


class CommentAction(str, enum.Enum):
    CREATED = "created"
    UPDATED = "updated"
    SKIPPED = "skipped"
    """Nothing to do or nothing allowed: not a pull request, a fork, a read-only token."""
    FAILED = "failed"
    """The API failed (network, 5xx, 422): reported as a warning."""


@dataclass(frozen=True)
class CommentOutcome:
    action: CommentAction
    reason: str = ""
    comment_id: int | None = None
    url: str | None = None


@dataclass(frozen=True)
class Comment:
    id: int
    body: str


@dataclass(frozen=True)
class Sticky:
    """What the step posts: the comment holding ``marker``, its body ``render(previous body)``
    (None: there is none yet), added only when ``create`` (else only one there is updated)."""

    marker: str
    render: Callable[[str | None], str]
    create: bool


def sticky_of(
    result: RunResult, shown: RunVerdict, settings: Settings, config_name: str
) -> Sticky | Note | None:
    """The comment the step posts for ``result`` (its verdict ``shown``), or None (``comment:
    off``), or the log line saying why a shard posts none (the merge job posts the run's)."""
    if not settings.comment.updates:
        return None
    if result.shard is not None:
        return Note(
            f"flakestorm: shard {result.shard}: no pull request comment (the merge job "
            "posts the run's one comment)"
        )
    from flakestorm.errors import ExitCode
    from flakestorm.reporters import comment

    key = comment.marker_key(config_name)
    redact = settings.redact.public

    def render(previous: str | None) -> str:
        state = comment.parse_state(previous) if previous is not None else None
        return comment.render(result, state, key, redact=redact, shown=shown)

    passed = shown.code == ExitCode.PASSED
    return Sticky(comment.marker(key), render, create=settings.comment.creates(passed))


def marked(items: Sequence[Any], marker: str) -> Comment | None:
    """The first of a page of listed comments (the REST API's JSON) whose body holds
    ``marker``."""
    for item in items:
        body = item.get("body") if isinstance(item, dict) else None
        if isinstance(body, str) and marker in body and isinstance(item.get("id"), int):
            return Comment(item["id"], body)
    return None


def sticky_body(body: str, marker: str) -> str:
    """``body`` as posted: with ``marker`` (without it the next run would add a second
    comment), cut to :data:`COMMENT_LIMIT` with the marker kept at its end."""
    if marker not in body:
        body = f"{marker}\n{body}"
    if len(body) > COMMENT_LIMIT:
        body = body[: COMMENT_LIMIT - len(marker) - 2] + "…\n" + marker
    return body


def outcome_note(outcome: CommentOutcome) -> Note | None:
    """The log line of a comment created or updated (skips and failures were told by
    :meth:`~flakestorm.github.client.GitHub.sticky_comment` as notices or warnings)."""
    if outcome.action not in (CommentAction.CREATED, CommentAction.UPDATED):
        return None
    where = f": {outcome.url}" if outcome.url else ""
    return Note(f"flakestorm: pull request comment {outcome.action.value}{where}")
