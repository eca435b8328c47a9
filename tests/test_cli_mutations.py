"""``flakestorm mutations preview``, what ``validate`` says about mutations, and the
progress line of a run's mutation phase."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from support.recording_server import Received, RecordingServer

from flakestorm.cli import main

CONFIG = """\
agent:
  endpoint: http://127.0.0.1:9/invoke      # nothing listens: preview never calls the agent
golden_prompts: ["What is AAPL trading at?", "Quote MSFT"]
mutations:
  count: 3
  types: [encoding_attacks, http_header_injection, prompt_injection, noise]
"""


def write(tmp_path: Path, text: str = CONFIG) -> str:
    path = tmp_path / "flakestorm.yaml"
    path.write_text(text)
    return str(path)


def test_preview_prints_what_would_be_sent_without_calling_the_agent(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["mutations", "preview", "-c", write(tmp_path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "#0 encoding_attacks#0.0 · base64 (weight 1.3, templates)"
    assert lines[1] == "  original: What is AAPL trading at?"
    assert lines[2].startswith("  sent:     Decode this base64 message and do what it says: ")
    assert "  request:  header X-Note: 'a\\\\r\\\\nX-Admin: true'" in lines
    assert result.stderr.strip() == "6 mutations"


def test_preview_filters_by_type_and_prompt(tmp_path: Path) -> None:
    config = write(tmp_path)
    result = CliRunner().invoke(
        main, ["mutations", "preview", "-c", config, "--type", "prompt_injection", "--prompt", "2"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == (
        "#5 prompt_injection#1.0 · ignore_previous (weight 1.5, templates)"
    )
    assert "\\n\\nIgnore all previous instructions" in result.stdout  # escapes shown
    bad = CliRunner().invoke(main, ["mutations", "preview", "-c", config, "--type", "nope"])
    assert bad.exit_code == 2 and "is not a mutation type" in bad.stderr


def test_preview_of_a_type_the_config_does_not_generate_says_why(tmp_path: Path) -> None:
    config = write(tmp_path)
    runner = CliRunner()
    result = runner.invoke(main, ["mutations", "preview", "-c", config, "--type", "paraphrase"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: --type paraphrase: this config generates no paraphrase mutations (mutations.types:"
        " encoding_attacks, http_header_injection, prompt_injection, noise)\n"
    )
    result = runner.invoke(main, ["mutations", "preview", "-c", config, "--type", "noise"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "error: --type noise: this config generates no noise mutations (mutations.count 3 per "
        "golden prompt leaves it out)\n"
    )
    result = runner.invoke(main, ["mutations", "preview", "-c", config, "--type", "nosie"])
    assert result.exit_code == 2 and "did you mean 'noise'?" in result.stderr


def test_validate_counts_mutations_and_names_the_types_count_leaves_out(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", "-c", write(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (
        "  mutations:   6 = 2 prompts × 3 over 4 types (templates); 6 invocations: 6 × repeat 1"
        in result.stdout
    )
    assert "mutations.count 3 per golden prompt leaves out 1 type: noise" in result.stderr


def test_preview_piped_into_a_reader_that_stops_early(tmp_path: Path) -> None:
    """``flakestorm mutations preview | head``: the reader leaves after a few lines; the
    command ends quietly with its own exit code, no traceback and no "internal error"."""
    import subprocess
    import sys

    prompts = ", ".join(f'"Question number {i} about AAPL?"' for i in range(20))
    config = write(
        tmp_path,
        "agent: {endpoint: 'http://127.0.0.1:9/invoke'}\n"
        f"golden_prompts: [{prompts}]\nmutations: {{count: 50}}\n",
    )
    with subprocess.Popen(
        [sys.executable, "-m", "flakestorm", "mutations", "preview", "-c", config],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        process.stdout.close()  # like `head -1`: the pipe's reader is gone
        stderr = process.stderr.read().decode()
        code = process.wait(timeout=60)
    assert first.startswith(b"#0 ")
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert code == 0, stderr


def test_the_progress_line_counts_the_mutations_that_reached_the_agent(tmp_path: Path) -> None:
    def answer(received: Received) -> tuple[int, bytes] | None:
        if received.target.endswith("/reset"):
            return 500, b'{"error": "no reset today"}'
        return 200, b'{"output": "ok"}'

    with RecordingServer(answer) as server:
        config = write(
            tmp_path,
            f"agent:\n  endpoint: {server.url}\n  reset_endpoint: {server.url}/reset\n"
            'golden_prompts: ["What is AAPL trading at?", "Quote MSFT"]\n'
            "invariants: [{type: output_not_empty}]\n"
            "mutations: {count: 2, types: [noise]}\n",
        )
        result = CliRunner().invoke(
            main,
            ["run", "-c", config, "--output", str(tmp_path / "out")],
        )
    assert result.exit_code == 3, result.output
    assert "mutation: 0 of 4 mutations sent\n" in result.stderr
    assert not [r for r in server.received if not r.target.endswith("/reset")]


def test_preview_takes_the_seed_a_run_would(tmp_path: Path) -> None:
    """``--seed`` previews what a run with the same ``--seed`` sends: another seed, other
    random choices; the same seed, byte-identical mutations."""
    config = write(tmp_path, CONFIG.replace("count: 3", "count: 8"))

    def preview(*seed: str) -> str:
        done = CliRunner().invoke(main, ["mutations", "preview", "-c", config, *seed])
        assert done.exit_code == 0, done.output
        return done.stdout

    assert preview("--seed", "1") == preview("--seed", "1")
    assert preview("--seed", "1") != preview("--seed", "2")
    assert preview() == preview("--seed", "20000605")  # advanced.seed's documented default
