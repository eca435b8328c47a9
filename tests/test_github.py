"""GitHub I/O: workflow commands, file commands and the sticky comment against a fake API."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from support.fake_github import FakeGitHub

from flakestorm.github.client import (
    ANNOTATION_LIMIT,
    MESSAGE_LIMIT,
    SUMMARY_LIMIT_BYTES,
    Annotation,
    CommentAction,
    GitHub,
    Level,
    escape_data,
    escape_property,
    pull_request_of,
)

REPO = "octo/agent"
MARKER = "<!-- flakestorm:comment key=flakestorm.yaml -->"


def _gh(env: dict[str, str] | None = None, **kwargs: object) -> tuple[GitHub, io.StringIO]:
    out = io.StringIO()
    return GitHub(env or {}, out=out, **kwargs), out  # type: ignore[arg-type]


def _event(tmp_path: Path, payload: dict[str, object]) -> str:
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return str(path)


def _pr_env(
    tmp_path: Path,
    api: FakeGitHub,
    token: str = "rw",
    head: str = REPO,
    number: int = 7,
) -> dict[str, str]:
    payload = {"pull_request": {"number": number, "head": {"repo": {"full_name": head}}}}
    return {
        "GITHUB_API_URL": api.url,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": _event(tmp_path, payload),
        "INPUT_GITHUB-TOKEN": token,
    }


@pytest.fixture
def api() -> Iterator[FakeGitHub]:
    with FakeGitHub(tokens={"rw": "write", "ro": "read"}) as fake:
        yield fake


# --------------------------------------------------------------------------- outputs, summary


def _parse_outputs(text: str) -> dict[str, str]:
    """Read a GITHUB_OUTPUT file the way the runner does."""
    values: dict[str, str] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line:
            i += 1
            continue
        name, _, delimiter = line.partition("<<")
        body = []
        i += 1
        while lines[i] != delimiter:
            body.append(lines[i])
            i += 1
        values[name] = "\n".join(body)
        i += 1
    return values


def test_set_output_uses_a_heredoc_with_a_delimiter_not_in_the_value(tmp_path: Path) -> None:
    path = tmp_path / "output"
    gh, _ = _gh({"GITHUB_OUTPUT": str(path)})
    tricky = "line one\nghadelimiter_x\nscore<<EOF\n::set-output name=passed::true"
    gh.set_output("score", "92.50")
    gh.set_output("report", tricky)
    text = path.read_text(encoding="utf-8")
    assert _parse_outputs(text) == {"score": "92.50", "report": tricky}
    delimiters = re.findall(r"^report<<(ghadelimiter_[0-9a-f]{32})$", text, re.M)
    assert len(delimiters) == 1 and delimiters[0] not in tricky


def test_set_output_rejects_a_bad_name_and_is_silent_outside_actions(tmp_path: Path) -> None:
    gh, _out = _gh({"GITHUB_OUTPUT": str(tmp_path / "o")})
    with pytest.raises(ValueError):
        gh.set_output("bad name<<", "x")
    local, local_out = _gh({})
    local.set_output("score", "1")  # no GITHUB_OUTPUT: nothing happens
    assert local_out.getvalue() == ""


def test_summary_is_appended_and_kept_under_one_mebibyte(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("# earlier step\n", encoding="utf-8")
    gh, _ = _gh({"GITHUB_STEP_SUMMARY": str(path)})
    assert gh.append_summary("## flakestorm\n| a | b |")
    assert path.read_text(encoding="utf-8") == "# earlier step\n## flakestorm\n| a | b |\n"
    gh.append_summary("é" * SUMMARY_LIMIT_BYTES)  # 2 MiB of UTF-8
    data = path.read_bytes()
    assert len(data) < SUMMARY_LIMIT_BYTES
    text = data.decode("utf-8")  # cut on a character boundary
    assert "Summary truncated" in text
    gh.append_summary("more")  # no room left: dropped, still under the limit
    assert len(path.read_bytes()) < SUMMARY_LIMIT_BYTES


def test_summary_without_a_summary_file_is_a_no_op() -> None:
    gh, _out = _gh({})
    assert gh.append_summary("x") is False


# --------------------------------------------------------------------------- workflow commands


def test_annotation_escaping_of_data_and_properties() -> None:
    gh, out = _gh()
    gh.error(
        "100% broken\r\nnext line ::set-output name=x::y",
        file="dir,with:odd/flakestorm.yaml",
        line=12,
        title="a: title, with commas",
    )
    assert out.getvalue() == (
        "::error file=dir%2Cwith%3Aodd/flakestorm.yaml,line=12,title=a%3A title%2C with commas"
        "::100%25 broken%0D%0Anext line ::set-output name=x::y\n"
    )
    assert escape_data("%\r\n:,") == "%25%0D%0A:,"
    assert escape_property("%\r\n:,") == "%25%0D%0A%3A%2C"


def test_annotations_omit_missing_properties_and_cut_long_messages() -> None:
    gh, out = _gh()
    gh.warning("plain")
    gh.notice("x" * (MESSAGE_LIMIT + 50), title="long")
    lines = out.getvalue().splitlines()
    assert lines[0] == "::warning::plain"
    message = lines[1].split("::", 2)[2]
    assert len(message) == MESSAGE_LIMIT and message.endswith("…")


def test_at_most_ten_errors_then_one_summarising_annotation() -> None:
    gh, out = _gh()
    annotations = [Annotation(f"invariant {i} failed", "f.yaml", i + 1) for i in range(14)]
    gh.annotate_all(Level.ERROR, annotations, lambda n: f"{n} more failed")
    errors = [line for line in out.getvalue().splitlines() if line.startswith("::error")]
    assert len(errors) == ANNOTATION_LIMIT
    assert errors[-1] == "::error::5 more failed"
    assert errors[8].endswith("::invariant 8 failed")
    # once the cap is reached, further errors become plain log lines
    assert gh.error("one more ::x::") is False
    assert out.getvalue().splitlines()[-1] == "error: one more :\u200b:x:\u200b:"
    # other kinds have their own cap
    assert gh.warning("still shown") is True


def test_exactly_ten_annotations_are_all_shown() -> None:
    gh, out = _gh()
    gh.annotate_all(Level.ERROR, [Annotation(f"e{i}") for i in range(10)], lambda n: "more")
    assert out.getvalue().count("::error::e") == 10
    assert "more" not in out.getvalue()


def test_masks_each_line_of_a_multi_line_secret() -> None:
    gh, out = _gh()
    gh.add_mask("s3cr%t")
    gh.add_mask("-----BEGIN KEY-----\r\nabc\n\n-----END KEY-----\n")
    gh.add_mask("")
    assert out.getvalue().splitlines() == [
        "::add-mask::s3cr%25t",
        "::add-mask::-----BEGIN KEY-----",
        "::add-mask::abc",
        "::add-mask::-----END KEY-----",
    ]


def test_group_and_untrusted_text() -> None:
    gh, out = _gh()
    with gh.group("running: a, b"):
        gh.log("inside")
    gh.untrusted("::set-output name=passed::true\n::error::pwned")
    gh.untrusted("::error::again")
    lines = out.getvalue().splitlines()
    assert lines[:3] == ["::group::running: a, b", "inside", "::endgroup::"]
    start, end = lines[3], lines[6]
    token = start.removeprefix("::stop-commands::")
    assert re.fullmatch(r"[0-9a-f]{32}", token)
    assert lines[4:6] == ["::set-output name=passed::true", "::error::pwned"]
    assert end == f"::{token}::"
    second = lines[7].removeprefix("::stop-commands::")
    assert re.fullmatch(r"[0-9a-f]{32}", second) and second != token
    assert lines[8:] == ["::error::again", f"::{second}::"]


# --------------------------------------------------------------------------- pull requests


def test_pull_request_from_the_event(tmp_path: Path) -> None:
    base = {"GITHUB_REPOSITORY": REPO, "GITHUB_EVENT_NAME": "pull_request"}
    pr = {"pull_request": {"number": 3, "head": {"repo": {"full_name": REPO}}}}
    found = pull_request_of({**base, "GITHUB_EVENT_PATH": _event(tmp_path, pr)})
    assert found is not None and (found.number, found.fork) == (3, False)
    fork = {"pull_request": {"number": 4, "head": {"repo": {"full_name": "someone/agent"}}}}
    found = pull_request_of({**base, "GITHUB_EVENT_PATH": _event(tmp_path, fork)})
    assert found is not None and found.fork
    target = {**base, "GITHUB_EVENT_NAME": "pull_request_target"}
    found = pull_request_of({**target, "GITHUB_EVENT_PATH": _event(tmp_path, fork)})
    assert found is not None and not found.fork  # pull_request_target has a write token
    comment = {"issue": {"number": 5, "pull_request": {"url": "x"}}}
    found = pull_request_of({**base, "GITHUB_EVENT_PATH": _event(tmp_path, comment)})
    assert found is not None and found.number == 5
    issue = {"issue": {"number": 6}}
    assert pull_request_of({**base, "GITHUB_EVENT_PATH": _event(tmp_path, issue)}) is None
    push = {"ref": "refs/heads/main"}
    assert pull_request_of({**base, "GITHUB_EVENT_PATH": _event(tmp_path, push)}) is None
    assert pull_request_of({**base, "GITHUB_EVENT_PATH": str(tmp_path / "missing")}) is None
    assert pull_request_of({}) is None


# --------------------------------------------------------------------------- sticky comment


def test_first_call_creates_second_updates(tmp_path: Path, api: FakeGitHub) -> None:
    gh, out = _gh(_pr_env(tmp_path, api))
    first = gh.sticky_comment(MARKER, lambda _: f"{MARKER}\nscore 80")
    assert first.action is CommentAction.CREATED and first.comment_id is not None
    second = gh.sticky_comment(MARKER, lambda _: f"{MARKER}\nscore 90")
    assert second.action is CommentAction.UPDATED and second.comment_id == first.comment_id
    comments = api.comments(REPO, 7)
    assert [c["body"] for c in comments] == [f"{MARKER}\nscore 90"]
    for request in api.requests:
        assert request.headers["Accept"] == "application/vnd.github+json"
        assert request.headers["X-GitHub-Api-Version"] == "2022-11-28"
        assert request.headers["Authorization"] == "Bearer rw"
    assert [r.method for r in api.requests] == ["GET", "POST", "GET", "PATCH"]
    assert out.getvalue() == ""


def test_the_marker_comment_is_found_on_page_three(tmp_path: Path, api: FakeGitHub) -> None:
    api.add_comments(REPO, 7, [f"chatter {i}" for i in range(230)])
    api.add_comments(REPO, 7, [f"{MARKER}\nscore 50"], user="github-actions[bot]")
    api.add_comments(REPO, 7, ["later chatter"])
    gh, _ = _gh(_pr_env(tmp_path, api))
    seen: list[str | None] = []

    def render(previous: str | None) -> str:
        seen.append(previous)
        return f"{MARKER}\nscore 60"

    outcome = gh.sticky_comment(MARKER, render)
    assert outcome.action is CommentAction.UPDATED
    assert seen == [f"{MARKER}\nscore 50"]
    gets = [r.path for r in api.requests if r.method == "GET"]
    assert gets == [
        f"/repos/{REPO}/issues/7/comments?per_page=100",
        f"/repos/{REPO}/issues/7/comments?per_page=100&page=2",
        f"/repos/{REPO}/issues/7/comments?per_page=100&page=3",
    ]
    bodies = [c["body"] for c in api.comments(REPO, 7)]
    assert bodies.count(f"{MARKER}\nscore 60") == 1 and len(bodies) == 232


def test_a_body_without_the_marker_gets_it(tmp_path: Path, api: FakeGitHub) -> None:
    gh, _ = _gh(_pr_env(tmp_path, api))
    gh.sticky_comment(MARKER, lambda _: "no marker here")
    gh.sticky_comment(MARKER, lambda _: "still none")
    assert [c["body"] for c in api.comments(REPO, 7)] == [f"{MARKER}\nstill none"]


def test_create_false_only_updates(tmp_path: Path, api: FakeGitHub) -> None:
    gh, _ = _gh(_pr_env(tmp_path, api))
    outcome = gh.sticky_comment(MARKER, lambda previous: MARKER, create=False)
    assert outcome.action is CommentAction.SKIPPED
    assert api.comments(REPO, 7) == []


def test_fork_pull_request_is_skipped_with_a_notice(tmp_path: Path, api: FakeGitHub) -> None:
    gh, out = _gh(_pr_env(tmp_path, api, head="someone/agent"))
    outcome = gh.sticky_comment(MARKER, lambda _: MARKER)
    assert outcome.action is CommentAction.SKIPPED
    assert api.requests == []
    assert out.getvalue().startswith("::notice title=flakestorm%3A no PR comment::")
    assert "fork" in out.getvalue() and "workflow_run" in out.getvalue()


def test_read_only_token_gives_a_notice_not_an_exception(tmp_path: Path, api: FakeGitHub) -> None:
    gh, out = _gh(_pr_env(tmp_path, api, token="ro"))
    outcome = gh.sticky_comment(MARKER, lambda _: MARKER)
    assert outcome.action is CommentAction.SKIPPED
    assert [(r.method, r.status) for r in api.requests] == [("GET", 200), ("POST", 403)]
    assert out.getvalue().startswith("::notice ")
    assert "HTTP 403" in out.getvalue() and "pull-requests: write" in out.getvalue()
    assert api.comments(REPO, 7) == []


def test_bad_token_401_is_a_notice(tmp_path: Path, api: FakeGitHub) -> None:
    gh, out = _gh(_pr_env(tmp_path, api, token="nope"))
    assert gh.sticky_comment(MARKER, lambda _: MARKER).action is CommentAction.SKIPPED
    assert "HTTP 401" in out.getvalue() and out.getvalue().startswith("::notice ")


def test_server_error_is_a_warning(tmp_path: Path, api: FakeGitHub) -> None:
    api.fail_next = [502]
    gh, out = _gh(_pr_env(tmp_path, api))
    outcome = gh.sticky_comment(MARKER, lambda _: MARKER)
    assert outcome.action is CommentAction.FAILED
    assert out.getvalue().startswith("::warning ") and "HTTP 502" in out.getvalue()


def test_network_error_is_a_warning(tmp_path: Path) -> None:
    with FakeGitHub() as dead:
        env = _pr_env(tmp_path, dead)
    gh, out = _gh(env)  # the server is gone: connection refused
    outcome = gh.sticky_comment(MARKER, lambda _: MARKER)
    assert outcome.action is CommentAction.FAILED
    assert out.getvalue().startswith("::warning ") and "ConnectionError" in out.getvalue()


def test_not_a_pull_request_does_nothing(tmp_path: Path, api: FakeGitHub) -> None:
    env = _pr_env(tmp_path, api)
    env["GITHUB_EVENT_PATH"] = _event(tmp_path, {"ref": "refs/heads/main"})
    gh, out = _gh(env)
    assert gh.sticky_comment(MARKER, lambda _: MARKER).action is CommentAction.SKIPPED
    assert api.requests == [] and out.getvalue() == ""


def test_github_api_url_is_honoured(tmp_path: Path) -> None:
    with FakeGitHub(tokens={"rw": "write"}, prefix="/api/v3") as ghes:
        assert ghes.url.endswith("/api/v3")
        gh, _ = _gh(_pr_env(tmp_path, ghes))
        assert gh.sticky_comment(MARKER, lambda _: MARKER).action is CommentAction.CREATED
        assert gh.sticky_comment(MARKER, lambda _: MARKER).action is CommentAction.UPDATED
        assert len(ghes.comments(REPO, 7)) == 1


def test_link_to_another_host_is_not_followed(tmp_path: Path) -> None:
    with FakeGitHub(tokens={"rw": "write"}, public_url="http://evil.example") as api:
        api.add_comments(REPO, 7, [f"c{i}" for i in range(150)])
        gh, _ = _gh(_pr_env(tmp_path, api))
        gh.sticky_comment(MARKER, lambda _: MARKER)
        assert [r.method for r in api.requests] == ["GET", "POST"]


def test_requests_exceptions_never_escape(tmp_path: Path, api: FakeGitHub) -> None:
    class Exploding(requests.Session):
        def request(self, *args: object, **kwargs: object) -> requests.Response:  # type: ignore[override]
            raise requests.exceptions.SSLError("certificate verify failed")

    gh, out = _gh(_pr_env(tmp_path, api), session=Exploding())
    assert gh.sticky_comment(MARKER, lambda _: MARKER).action is CommentAction.FAILED
    assert "SSLError" in out.getvalue()


def test_fake_github_runs_as_a_script() -> None:
    script = Path(__file__).parent / "support" / "fake_github.py"
    process = subprocess.Popen(
        [sys.executable, str(script), "--port", "0", "--token", "t:read"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        match = re.fullmatch(r"listening on (http://127\.0\.0\.1:(\d+))\n", line)
        assert match and int(match[2]) > 0
        base = match[1]
        reply = requests.post(
            f"{base}/repos/{REPO}/issues/1/comments",
            json={"body": "x"},
            headers={"Authorization": "Bearer t"},
            timeout=5,
        )
        assert reply.status_code == 403
        recorded = requests.get(f"{base}/_fake/requests", timeout=5).json()
        assert [(r["method"], r["status"]) for r in recorded] == [("POST", 403)]
    finally:
        process.terminate()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()
