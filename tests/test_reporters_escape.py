"""Untrusted text made safe: document_text, log_line, text, html_text, code_block, url_span."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from flakestorm.reporters.escape import (
    code_block,
    document_text,
    html_text,
    log_line,
    text,
    url_span,
)


def test_clean_neutralises_controls_surrogates_bidi_and_workflow_commands() -> None:
    assert document_text("a\r\nb\rc") == "a\nb\nc"
    assert document_text("x\x00y\x1b[31m\x7f\x85") == "x\ufffdy\ufffd[31m\ufffd\ufffd"
    assert document_text("lone \ud800 \udfff \ufffe") == "lone \ufffd \ufffd \ufffd"
    assert document_text("a\u202eb\u2066c") == "a⟨U+202E⟩b⟨U+2066⟩c"
    assert "::" not in document_text("::error file=x::boom")
    assert document_text("tab\tand\nnewline stay") == "tab\tand\nnewline stay"


def test_workflow_commands_are_defused_one_way_in_documents_and_log_lines() -> None:
    """``::`` and the runner's legacy ``##[`` (read anywhere in a line) alike, in a report
    document and in a log line."""
    assert document_text("x ##[error]pwned\n::warning::w") == (
        "x #\u200b#[error]pwned\n:\u200b:warning:\u200b:w"
    )
    assert log_line("x ##[error]pwned ::warning::w") == (
        "x #\u200b#[error]pwned :\u200b:warning:\u200b:w"
    )


def test_a_log_line_blanks_control_and_format_characters_and_is_cut() -> None:
    assert log_line("a\nb\tc\x1b[31m\u202ed\u2028e\u200bf") == "a b c [31m d e f"
    assert log_line("x" * 10, 5) == "xxxx…"
    assert log_line("x" * 5, 5) == "xxxxx"


def test_text_escapes_html_markdown_mentions_and_references() -> None:
    out = text("<b>x</b> & `code` *em* _em_ [a](b) | ~~s~~ $m$ @octocat #123 \\")
    assert "<" not in out and ">" not in out
    assert "&lt;b&gt;x&lt;/b&gt; &amp;" in out
    for raw in ("`", "*", "_", "[", "]", "|", "~", "$"):
        assert re.search(r"(?<!\\)" + re.escape(raw), out) is None, raw
    assert "@\u200docto" in out and "#\u200d123" in out
    assert text("line one\nline two") == "line one line two"


def test_html_text_escapes_for_raw_html_without_backslashes() -> None:
    out = html_text('</summary></details><script>x</script> "q" @me #1\n*x*')
    assert out == (
        "&lt;/summary&gt;&lt;/details&gt;&lt;script&gt;x&lt;/script&gt; &quot;q&quot; "
        "@\u200dme #\u200d1 *x*"
    )


def test_a_code_block_cannot_be_closed_from_inside() -> None:
    block = code_block("```\n````\nstill inside")
    fence = block.split("\n", 1)[0].removesuffix("text")
    assert len(fence) == 5
    inner = block.split("\n")[1:-1]
    assert all(not line.startswith(fence) for line in inner)


def test_a_url_span_cannot_be_closed_and_carries_no_markup() -> None:
    span = url_span('http://x/a b|`c`<s>"q"\\^{}\n::e', limit=1000)
    assert span == "`http://x/a%20b%7C%60c%60%3Cs%3E%22q%22%5C%5E%7B%7D%0A:\u200b:e`"
    assert url_span("") == "(none)"
    assert url_span("http://x/" + "a" * 500).endswith("a…`")


@given(st.text())
def test_url_spans_stay_one_code_span(value: str) -> None:
    span = url_span(value)
    if span == "(none)":
        return
    inner = span[1:-1]
    assert span[0] == span[-1] == "`"
    assert not any(c in inner for c in "`|<>\n\r")
    span.encode("utf-8")


@given(st.text())
def test_inline_text_never_carries_markup(value: str) -> None:
    out = text(value)
    assert "\n" not in out and "<" not in out and ">" not in out
    assert re.search(r"@\w", out) is None and re.search(r"#\d", out) is None
    assert re.search(r"(?<!\\)[`*_\[\]|]", out.replace("\\\\", "")) is None
    out.encode("utf-8")  # no lone surrogates
