"""The one redaction rule every message, log line and report goes through."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

from flakestorm.redaction import MIN_SECRET_CHARS, Redactor, masked_url, redact


def test_secrets_are_hidden_as_written_and_as_repr_escapes_them() -> None:
    secrets = {"s3cret\nline", "abc"}  # "abc" is too short to be worth hiding
    assert redact("x s3cret\nline y 's3cret\\nline' abc", secrets) == "x *** y '***' abc"
    assert MIN_SECRET_CHARS == 4


def test_a_secret_containing_another_is_hidden_whole() -> None:
    assert redact("token=abcd-efgh", {"abcd", "abcd-efgh"}) == "token=***"


def test_no_secret_worth_hiding_is_a_false_redactor_that_changes_nothing() -> None:
    redactor = Redactor({"", "ab"})
    assert not redactor and redactor("ab cd") == "ab cd"


def test_pieces_of_one_text_are_redacted_as_one_and_at_their_ends() -> None:
    redactor = Redactor({"Qx7Zk9Wv2Jm4Tp8R"})
    # split between pieces: masked where it starts; the later pieces' part of it left out
    assert redactor.pieces(["key Qx7Z", "k9Wv2", "Jm4Tp8R!"]) == ["key ***", "", "!"]
    # a piece cut short (an excerpt) ending in its start, one starting with its end, and one
    # wholly inside it: each masked, three characters or more
    assert redactor.pieces(["a Qx7", "Tp8R b", "9Wv2J"]) == ["a ***", "*** b", "***"]
    assert redactor.pieces(["a Qx", "8R b"]) == ["a Qx", "8R b"]
    # a model's two-character tokens with the timeline's gap between "Wv" and "Tp" (the
    # events holding "2J" and "m4" left out): each side's run of them is masked whole
    tokens = ["key ", "Qx", "7Z", "k9", "Wv", "Tp", "8R", " ok"]
    assert redactor.pieces(tokens) == ["key ", "***", "", "", "", "***", "", " ok"]
    assert redactor.pieces(["hello", " world"]) == ["hello", " world"]
    assert Redactor(()).pieces(["Qx7Zk9Wv2Jm4Tp8R"]) == ["Qx7Zk9Wv2Jm4Tp8R"]


# ------------------------------------------------------------- redact before any cut, end to end

SECRET = "Qx7Zk9Wv2Jm4Tp8R"
"""A value the config takes from the environment (``${API_KEY}``)."""
BOUNDARIES = (40, 60, 80, 120, 160, 200, 300, 400, 500, 1000, 2000, 4000)
"""Where reports and log lines cut a text (reasons, error messages, progress, excerpts)."""
SPLITS = (4, len(SECRET) // 2, len(SECRET) - 4)
"""How much of the secret falls before the cut."""


def _answer(offset: int) -> str:
    """A reply whose secret starts at ``offset``, padded far past the last boundary."""
    return "." * offset + SECRET + "." * 4200


def _leaks(text: str) -> list[str]:
    runs = {SECRET[i : i + 4] for i in range(len(SECRET) - 3)}
    return sorted(run for run in runs if run in text)


@dataclasses.dataclass
class _ActionRun:
    code: int
    log: str
    results: Any
    texts: dict[str, str]
    """Every text the run wrote: the action's log (its mask command left out), the job
    summary, the PR comment, the terminal's report and each file of the reports folder."""


def _in_the_action(
    tmp_path: Path, agent: Callable[..., Any], config: dict[str, Any], command: str
) -> _ActionRun:
    """``config`` run by the action (``command``) on a pull request, its agent ``agent`` served
    on 127.0.0.1 (``${AGENT_URL}``) and ``${API_KEY}`` the secret."""
    import io

    from support.fake_github import FakeGitHub
    from support.server import LoopbackServer
    from test_entrypoint import entrypoint

    from flakestorm.github.client import GitHub
    from flakestorm.reporters import terminal
    from flakestorm.results.model import from_document

    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "flakestorm.yaml").write_text(json.dumps(config))
    files = tmp_path / "files"
    files.mkdir()
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps({"pull_request": {"number": 9, "head": {"repo": {"full_name": "o/r"}}}})
    )
    with LoopbackServer(agent) as server, FakeGitHub(tokens={"rw": "write"}) as api:
        env = {
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_OUTPUT": str(files / "output"),
            "GITHUB_STEP_SUMMARY": str(files / "summary"),
            "GITHUB_REPOSITORY": "o/r",
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_EVENT_PATH": str(event),
            "GITHUB_API_URL": api.url,
            "AGENT_URL": server.url_for("/chat"),
            "API_KEY": SECRET,
            "INPUT_CONFIG": "flakestorm.yaml",
            "INPUT_COMMAND": command,
            "INPUT_COMMENT": "always",
            "INPUT_GITHUB-TOKEN": "rw",
        }
        log = io.StringIO()
        code = entrypoint.main(env, GitHub(env, out=log))
        comments = [c["body"] for c in api.comments("o/r", 9)]
    out = workspace / "flakestorm-reports"
    results = from_document(json.loads((out / "results.json").read_text()))
    texts = {
        # the one line that must carry it: the mask command that hides it in the job log
        "action log": log.getvalue().replace(f"::add-mask::{SECRET}\n", ""),
        "summary": (files / "summary").read_text(),
        "PR comment": "\n".join(comments),
        "terminal": terminal.render(results),
        **{p.name: p.read_text() for p in out.iterdir()},
    }
    assert {"results.json", "junit.xml", "summary.md", "report.html"} <= set(texts)
    assert comments  # the comment was made
    return _ActionRun(code, log.getvalue(), results, texts)


def test_a_secret_straddling_every_excerpt_boundary_leaks_nowhere(tmp_path: Path) -> None:
    from support.server import Request, Response

    offsets = {f"b{b}-{k}": b - k for b in BOUNDARIES for k in SPLITS}

    def agent(request: Request) -> Response:
        cell = request.headers.get("X-Flakestorm-Cell", "")
        invariant = cell.split("[")[0]  # invariant[scenario]#run.prompt
        offset = offsets.get(invariant.partition("-")[2], 70)
        if invariant.startswith("json-"):  # not JSON: the error message quotes the body
            return Response(200, _answer(offset), {"Content-Type": "application/json"})
        return Response.json({"output": _answer(offset)})

    invariants = [
        {"id": f"{kind}-{name}", "type": "contains", "value": "absent", "severity": "critical"}
        for kind in ("text", "json")
        for name in offsets
    ]
    config = {
        "agent": {"endpoint": "${AGENT_URL}", "headers": {"X-Api-Key": "${API_KEY}"}},
        "golden_prompts": ["hello"],
        "contract": {"name": "c", "invariants": invariants, "chaos_matrix": [{"name": "calm"}]},
        "advanced": {"concurrency": 8},
    }
    run = _in_the_action(tmp_path, agent, config, "ci")
    assert run.code == 1, run.log
    cells = run.results.phases["contract"].cells
    assert len(cells) == 2 * len(offsets) and all(c.status.value == "failed" for c in cells)
    # the reasons quote 80 characters of the reply (text) or of the body, in the error message
    # (json): the cells whose secret straddles that cut show it redacted, whole
    quoted = [c.reason for c in cells if c.invariant_id.startswith("text-b80-")]
    messages = [c.prompts[0].error_message for c in cells if c.invariant_id.startswith("json-b80-")]
    assert len(quoted) == len(messages) == len(SPLITS)
    assert all("***" in text for text in quoted + messages), quoted + messages
    assert "::error" in run.texts["action log"]  # the annotations were made
    leaks = {name: _leaks(text) for name, text in run.texts.items() if _leaks(text)}
    assert leaks == {}


# ------------------------------------------------------------- a secret streamed in pieces

STREAMED = (
    "The key is ",
    *("Qx7", "Zk9W", "v2J", "m4Tp", "8R"),  # the secret split between five events
    ". Again: ",
    "Qx7Zk9",  # the timeline's eighth event: the secret goes on in events it leaves out
    *("Wv2Jm4Tp8R", *(f" w{n}" for n in range(12)), " key Qx7Zk9Wv2"),  # left out
    "Jm4Tp8R",  # the tail's first event: the end of a secret begun in events left out
    " and ",
    "." * 36 + SECRET,  # an event longer than its 40-character excerpt, cut in the secret
    *(" x", " y", " z", " w"),
)
"""What a leaking agent streams, one event each (the timeline keeps the first 8 events and the
last 8, [DONE] included)."""


def test_a_secret_streamed_in_pieces_leaks_nowhere(tmp_path: Path) -> None:
    """A streamed reply's events are short: a model writes a key a few characters at a time,
    so no event holds it whole. Every event's excerpt is kept in results.json and a failed
    cell's timeline is shown in every report: the secret is found in the events' joined text,
    and at the ends of an event cut short or next to events left out."""
    from support.server import Request, Response

    frames = [
        b"data: " + json.dumps({"choices": [{"delta": {"content": text}}]}).encode() + b"\n\n"
        for text in STREAMED
    ]

    def agent(request: Request) -> Response:
        return Response(
            200, b"".join([*frames, b"data: [DONE]\n\n"]), {"Content-Type": "text/event-stream"}
        )

    invariant = {"id": "absent", "type": "contains", "value": "absent", "severity": "critical"}
    config = {
        "agent": {
            "endpoint": "${AGENT_URL}",
            "headers": {"X-Api-Key": "${API_KEY}"},
            "stream": {"format": "openai"},
        },
        "golden_prompts": ["hello"],
        "contract": {"name": "c", "invariants": [invariant], "chaos_matrix": [{"name": "calm"}]},
    }
    run = _in_the_action(tmp_path, agent, config, "contract")
    assert run.code == 1, run.log
    (cell,) = run.results.phases["contract"].cells
    stream = cell.prompts[0].stream
    assert cell.status.value == "failed" and stream is not None
    assert (stream.content_events, stream.events_left_out) == (29, 14)
    # what is left of each event kept (worked out by hand): the secret whole where it starts,
    # the events that held the rest of it emptied, and an end or start of it masked
    assert [e.text for e in stream.timeline if e.kind == "content"] == [
        "The key is ",
        *("***", "", "", "", ""),
        ". Again: ",
        "***",
        "***",
        " and ",
        "." * 36 + "***",
        *(" x", " y", " z", " w"),
    ]
    assert "| content |" in run.texts["summary.md"]  # the failing stream's timeline is shown
    leaks = {name: _leaks(text) for name, text in run.texts.items() if _leaks(text)}
    assert leaks == {}


def test_secrets_are_hidden_as_json_and_urls_encode_them() -> None:
    # an agent that sends its key on to a tool puts it in a JSON body or a URL: results.json
    # keeps those bodies, and `replay export` decodes them into a session file
    secret = 'pa"ss/w+rd=é'
    body = json.dumps({"auth": secret}) + " " + json.dumps({"auth": secret}, ensure_ascii=False)
    url = f"/quote?k={quote(secret, safe='')}&q={quote_plus(secret)}"
    assert redact(body, {secret}) == '{"auth": "***"} {"auth": "***"}'
    assert redact(url, {secret}) == "/quote?k=***&q=***"


def test_a_url_is_shown_without_credentials_query_string_or_fragment() -> None:
    shown = {
        "https://judge.example/v1": "https://judge.example/v1",
        "https://judge.example/v1?api-key=s3cret&v=1": "https://judge.example/v1?***",
        "https://u:pw@judge.example/v1?k=s3cret": "https://***@judge.example/v1?***",
        "https://judge.example/v1#k=s3cret?x": "https://judge.example/v1#***",
    }
    assert {url: masked_url(url) for url in shown} == shown
