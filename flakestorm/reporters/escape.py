"""Untrusted text made safe for every report format, and for a terminal or a CI log.

Every function here that may cut a text redacts secrets from it first (the run's
:func:`flakestorm.redaction.active` redactor), so no excerpt ends inside a secret.

Untrusted text
--------------
Agent output is untrusted, and so is every string the config supplies (ids, scenario names,
prompts, and the reasons and warnings that quote them). GitHub renders a summary as markdown
*and* HTML, then turns ``@name`` into mentions and ``#123`` into issue links in the rendered
text; a runner reads a workflow command in any line of a step's log. So no such string is ever
emitted as it is; each goes through exactly one of these, named by where it is safe:

- :func:`log_line` — one printable line for a terminal or a CI log: control and format
  characters (:func:`flakestorm.checks.excerpts.invisible`) become spaces, workflow commands
  are defused, and the line is cut to its limit.
- :func:`document_text` — the text itself, for every report document (XML, HTML, markdown):
  ``\\r\\n``/``\\r`` become ``\\n``; control characters (C0 but tab and newline, DEL, C1), lone
  surrogates and U+FFFE/U+FFFF become U+FFFD (so the result is valid XML 1.0 and encodable as
  UTF-8); bidirectional controls (RTL override and friends) become a visible ``⟨U+202E⟩`` so
  they cannot reorder what a reader sees; workflow commands are defused.
  :func:`document_excerpt` is the same, cut to a limit with a note of how much was cut.
- :func:`text` — one line of inline markdown: :func:`document_text`, newlines to spaces,
  ``& < > "`` as HTML entities, markdown punctuation (`` \\ ` * _ [ ] | ~ $ ``)
  backslash-escaped, and a zero-width joiner after ``@`` and ``#`` when a word or digit follows,
  which breaks mentions and issue references. Safe in paragraphs, list items and table cells.
- :func:`html_text` — one line inside raw HTML (``<summary>``): :func:`document_text`, newlines
  to spaces, HTML entities, the same mention/reference breaking (markdown is not parsed there).
- :func:`code_block` — a fenced code block longer than any run of backticks in the text, so
  nothing inside can close it; markdown and HTML are inert inside.
- :func:`url_span` — a URL the agent called, as an inline code span (not a clickable autolink):
  :func:`document_text`, then whitespace and ``" < > \\ ^ ` { | }`` percent-encoded, so neither
  the span nor a table cell can be closed from inside.

Workflow commands are defused the one way (:func:`_defused`) in a log line and in a document:
``::`` (a command at the start of a line) and ``##[`` (the runner's legacy form, which it reads
anywhere in a line) get a zero-width space inside. A verdict's reason quotes agent output as
:func:`flakestorm.checks.excerpts.excerpt` cuts it, below the reporters.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from flakestorm.checks.excerpts import invisible
from flakestorm.redaction import active

EXCERPT_CHARS = 500
"""How much of a reply (or prompt) the reports quote."""

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff" + _BIDI + "]")
_NEWLINES = re.compile(r"\r\n?")
_MD_PUNCTUATION = re.compile(r"([\\`*_\[\]|~$])")
_REFERENCE = re.compile(r"([@#])(?=\w)")
_ZWJ = "\u200d"


def _replace_unsafe(match: re.Match[str]) -> str:
    char = match.group()
    return f"⟨U+{ord(char):04X}⟩" if char in _BIDI else "\ufffd"


def _defused(value: str) -> str:
    """``value`` with no workflow command a runner would read: ``::`` and ``##[`` each get a
    zero-width space inside."""
    value = value.replace("::", ":\u200b:") if "::" in value else value
    return value.replace("##[", "#\u200b#[") if "##[" in value else value


def _cut(value: str, limit: int | None) -> str:
    """``value`` cut to ``limit`` characters, the last of them an ellipsis."""
    return value if limit is None or len(value) <= limit else value[: limit - 1] + "…"


def log_line(text: str, limit: int = 200) -> str:
    """One printable line of at most ``limit`` characters for a terminal or a CI log: each
    :func:`~flakestorm.checks.excerpts.invisible` character a space, workflow commands defused.
    Secrets are redacted first (:func:`flakestorm.redaction.active`)."""
    text = "".join(" " if invisible(char) else char for char in active()(text))
    return _cut(_defused(text), limit)


def document_text(value: str) -> str:
    """``value`` made safe to show in any report document (see the module docstring)."""
    value = _NEWLINES.sub("\n", value)
    return _defused(_UNSAFE.sub(_replace_unsafe, value))


def document_excerpt(value: str, limit: int) -> str:
    """:func:`document_text` ``value``, cut to ``limit`` characters with a note of how much was
    cut (secrets redacted before the cut: :func:`flakestorm.redaction.active`)."""
    value = active()(value)
    if len(value) > limit:
        return f"{document_text(value[:limit])}… ({len(value) - limit:,} more characters)"
    return document_text(value)


def _html_escape(value: str) -> str:
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return value.replace('"', "&quot;")


def _one_line(value: str) -> str:
    return document_text(value).replace("\n", " ").replace("\t", " ")


def text(value: str, limit: int | None = None) -> str:
    """``value`` as one line of inline markdown that renders as exactly that text."""
    value = _html_escape(_one_line(_cut(active()(value), limit)))
    value = _MD_PUNCTUATION.sub(r"\\\1", value)
    return _REFERENCE.sub(r"\1" + _ZWJ, value)


def html_text(value: str, limit: int | None = None) -> str:
    """``value`` as one line of text inside raw HTML in a markdown document."""
    value = _cut(active()(value), limit)
    return _REFERENCE.sub(r"\1" + _ZWJ, _html_escape(_one_line(value)))


def code_block(value: str, limit: int = EXCERPT_CHARS) -> str:
    """An excerpt of ``value`` in a fenced code block that nothing inside can close."""
    body = document_excerpt(value, limit)
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{body}\n{fence}"


_URL_UNSAFE = re.compile(r'[\s"<>\\^`{|}]')


def url_span(value: str, limit: int = 200) -> str:
    """``value`` (a URL) as an inline code span, safe in a table cell.

    Whitespace and the characters a URL may not contain unencoded (``" < > \\ ^ ` { | }``) are
    percent-encoded, as a browser's address bar shows them: nothing can end the span or the
    table cell, and no markup appears even in the markdown source.
    """
    value = _cut(active()(value), limit)
    value = _URL_UNSAFE.sub(lambda m: quote(m.group(), safe=""), document_text(value))
    return f"`{value}`" if value else "(none)"
