"""The job summary: escaping of untrusted text, structure, and the 1 MiB limit."""

from __future__ import annotations

import re

from golden.cases import failing, hostile, large_run, passing
from hypothesis import given
from hypothesis import strategies as st

from flakestorm.reporters import markdown
from flakestorm.reporters.markdown import SUMMARY_LIMIT_BYTES, clean, code_block, html_text, text

# --------------------------------------------------------------------------- escaping units


def test_clean_neutralises_controls_surrogates_bidi_and_workflow_commands() -> None:
    assert clean("a\r\nb\rc") == "a\nb\nc"
    assert clean("x\x00y\x1b[31m\x7f\x85") == "x\ufffdy\ufffd[31m\ufffd\ufffd"
    assert clean("lone \ud800 \udfff \ufffe") == "lone \ufffd \ufffd \ufffd"
    assert clean("a\u202eb\u2066c") == "a⟨U+202E⟩b⟨U+2066⟩c"
    assert "::" not in clean("::error file=x::boom")
    assert clean("tab\tand\nnewline stay") == "tab\tand\nnewline stay"


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


@given(st.text())
def test_inline_text_never_carries_markup(value: str) -> None:
    out = text(value)
    assert "\n" not in out and "<" not in out and ">" not in out
    assert re.search(r"@\w", out) is None and re.search(r"#\d", out) is None
    assert re.search(r"(?<!\\)[`*_\[\]|]", out.replace("\\\\", "")) is None
    out.encode("utf-8")  # no lone surrogates


# --------------------------------------------------------------------------- the summary


def test_verdict_and_scores_come_first() -> None:
    out = markdown.render(failing())
    head = out.split("### Contract", 1)[0]
    assert head.startswith("## flakestorm: ❌ FAIL")
    assert "**Overall score: 40.00**" in head and "min\\_score 80" in head
    assert "The gate failed:" in head and "mentions\\_refund\\[tool\\_outage\\]" in head
    assert "phases: contract" in head and "seed 1234" in head and "10 invocations" in head
    assert "stopped early (max\\_invocations)" in head
    assert "No reset\\_endpoint configured" in head


def test_matrix_marks_every_status_with_a_legend() -> None:
    out = markdown.render(failing())
    assert "| mentions\\_refund | critical | ✅ | ❌ | ⏸ |" in out
    assert "| no\\_injection | high | ⚠️ | 💥 | ❌⚠️ |" in out
    assert "| quick | low | ✅ | ➖ | ➖ |" in out
    assert markdown.LEGEND in out


def test_failed_and_errored_cells_have_details_critical_first() -> None:
    out = markdown.render(failing())
    summaries = re.findall(r"<summary>(.*)</summary>", out)
    assert [s.split(" · ")[0] for s in summaries] == [
        "❌ mentions_refund[tool_outage]",
        "💥 no_injection[tool_outage]",
        "❌⚠️ no_injection[poisoned_memory]",
    ]
    assert "tool\\_error(orders\\_api, 503)" in out
    assert "No reply: timeout: no reply within 30000 ms" in out
    assert "Sent to the agent (after context attacks):" in out


def test_a_passing_run_has_no_details() -> None:
    out = markdown.render(passing())
    assert out.startswith("## flakestorm: ✅ PASS")
    assert "<details>" not in out


def test_hostile_output_stays_text() -> None:
    out = markdown.render(hostile())
    outside_code = re.sub(r"(`{3,})text\n.*?\n\1\n", "", out, flags=re.S)
    assert "<script" not in outside_code and "<img" not in outside_code
    assert "<!--" not in outside_code
    assert outside_code.count("<details>") == outside_code.count("</details>") == 2
    assert re.search(r"^::", out, flags=re.M) is None and "::error" not in out
    assert "@team" not in out and "#42" not in out
    assert "\u202e" not in out and "\x1b" not in out and "\x00" not in out
    out.encode("utf-8")
    assert len(out) < 20_000  # the 2 MiB reply is an excerpt


def test_ten_thousand_cells_stay_under_one_mib_with_a_note() -> None:
    result = large_run(100, 100)
    out = markdown.render(result)
    size = len(out.encode("utf-8"))
    assert size < SUMMARY_LIMIT_BYTES
    assert size > SUMMARY_LIMIT_BYTES - 64 * 1024  # it used the room
    assert out.count("\n| invariant\\_") == 100  # the whole matrix
    note = re.search(r"_(\d+) of 5000 failed or errored cells omitted", out)
    assert note is not None
    assert out.count("<details>") == 5000 - int(note.group(1))
    assert "`report.html` and `results.json`" in out


def test_a_huge_matrix_is_cut_too() -> None:
    out = markdown.render(large_run(10_000, 1, reply_chars=10), limit_bytes=64 * 1024)
    assert len(out.encode("utf-8")) < 64 * 1024
    assert re.search(r"_\d+ of 10000 matrix rows omitted", out)
