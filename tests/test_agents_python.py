"""PythonAgent: functions, coroutines, objects and classes; errors, timeouts, imports."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from flakestorm.agents import Call
from flakestorm.agents.console import AgentConsole, excerpt
from flakestorm.agents.factory import build_agent
from flakestorm.agents.python import PythonAgent, current_call
from flakestorm.config import AgentConfig, AgentType
from flakestorm.errors import AgentErrorKind, ConfigError, Problem
from flakestorm.redaction import Redactor, redacting

Write = Callable[[str], str]
"""The ``write_module`` fixture (conftest.py)."""


def python_agent(tmp_path: Path, endpoint: str, **fields: Any) -> PythonAgent:
    return PythonAgent(AgentConfig(type=AgentType.PYTHON, endpoint=endpoint, **fields), tmp_path)


def test_a_sync_function(tmp_path: Path, write_module: Write) -> None:
    name = write_module("def agent(prompt):\n    return prompt.upper()\n")
    reply = python_agent(tmp_path, f"{name}:agent").invoke("hi")
    assert reply.ok and reply.output == "HI"
    assert reply.raw == "HI"
    assert reply.status is None
    assert reply.latency_ms > 0


def test_an_async_function(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        import asyncio
        async def agent(prompt):
            await asyncio.sleep(0)
            return "async " + prompt
        """
    )
    assert python_agent(tmp_path, f"{name}:agent").invoke("hi").output == "async hi"


def test_an_async_function_called_from_many_threads(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        import asyncio
        async def agent(prompt):
            await asyncio.sleep(0.001)
            return prompt * 2
        """
    )
    agent = python_agent(tmp_path, f"{name}:agent")
    with ThreadPoolExecutor(16) as pool:
        outputs = list(pool.map(lambda i: agent.invoke(str(i)).output, range(64)))
    assert outputs == [str(i) * 2 for i in range(64)]
    agent.close()


def test_an_object_with_invoke(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        class Bot:
            def invoke(self, prompt):
                return {"answer": "obj " + prompt}
        bot = Bot()
        """
    )
    assert python_agent(tmp_path, f"{name}:bot").invoke("hi").output == "obj hi"


def test_a_class_is_instantiated_once(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        class Bot:
            created = 0
            def __init__(self):
                Bot.created += 1
            async def invoke(self, prompt):
                return f"{prompt} #{Bot.created}"
        """
    )
    agent = python_agent(tmp_path, f"{name}:Bot")
    assert [agent.invoke(p).output for p in "ab"] == ["a #1", "b #1"]
    assert sys.modules[name].Bot.created == 1


def test_a_dotted_attribute(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        class ns:
            @staticmethod
            def agent(prompt):
                return "nested"
        """
    )
    assert python_agent(tmp_path, f"{name}:ns.agent").invoke("x").output == "nested"


def test_a_dict_reply_uses_auto_extraction_and_response_path(
    tmp_path: Path, write_module: Write
) -> None:
    name = write_module(
        """
        def agent(prompt):
            return {"data": {"choices": [{"text": "deep"}]}, "result": {"n": 1}}
        """
    )
    assert python_agent(tmp_path, f"{name}:agent").invoke("x").output == '{"n": 1}'
    deep = python_agent(tmp_path, f"{name}:agent", response_path="data.choices.0.text")
    assert deep.invoke("x").output == "deep"
    missing = python_agent(tmp_path, f"{name}:agent", response_path="data.answer").invoke("x")
    assert missing.error is AgentErrorKind.RESPONSE_PATH
    assert 'no key "answer" at data (keys there: "choices")' in missing.error_message


def test_none_is_not_an_answer(tmp_path: Path, write_module: Write) -> None:
    name = write_module("def agent(prompt):\n    return None\n")
    reply = python_agent(tmp_path, f"{name}:agent").invoke("x")
    assert reply.error is AgentErrorKind.UNPARSEABLE
    assert "returned None" in reply.error_message


def test_an_exception_is_reported_by_type_and_message(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        def agent(prompt):
            raise ValueError("no such stock: " + prompt)
        """
    )
    reply = python_agent(tmp_path, f"{name}:agent").invoke("ACME")
    assert reply.error is AgentErrorKind.EXCEPTION
    assert reply.error_message.startswith("ValueError: no such stock: ACME (at ")
    assert "Traceback" in reply.extra["traceback"]


def test_an_async_exception(tmp_path: Path, write_module: Write) -> None:
    name = write_module("async def agent(prompt):\n    raise KeyError('k')\n")
    reply = python_agent(tmp_path, f"{name}:agent").invoke("x")
    assert reply.error is AgentErrorKind.EXCEPTION
    assert reply.error_message.startswith("KeyError: 'k'")


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_hung_agent_times_out_and_the_run_goes_on(
    tmp_path: Path, write_module: Write, kind: str
) -> None:
    name = write_module(
        """
        import asyncio, threading
        RELEASE = threading.Event()
        def hang(prompt):
            if prompt == "hang":
                RELEASE.wait()
            return "done"
        async def ahang(prompt):
            if prompt == "hang":
                await asyncio.Event().wait()
            return "done"
        """
    )
    attr = "hang" if kind == "sync" else "ahang"
    agent = python_agent(tmp_path, f"{name}:{attr}", timeout=200)
    try:
        reply = agent.invoke("hang")
        assert reply.error is AgentErrorKind.TIMEOUT
        assert "200 ms" in reply.error_message
        assert 150 <= reply.latency_ms < 1000
        assert agent.invoke("ok").output == "done"
    finally:
        sys.modules[name].RELEASE.set()  # the hung worker thread ends


def test_current_call_is_set_around_each_invocation(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        from flakestorm.agents.python import current_call
        def agent(prompt):
            return current_call.get().cell_id
        async def aagent(prompt):
            return current_call.get().scenario
        """
    )
    call = Call(cell_id="inv[outage]", scenario="outage")
    assert python_agent(tmp_path, f"{name}:agent").invoke("x", call).output == "inv[outage]"
    assert python_agent(tmp_path, f"{name}:aagent").invoke("x", call).output == "outage"
    assert current_call.get(None) is None


def test_build_agent_makes_a_python_agent(tmp_path: Path, write_module: Write) -> None:
    name = write_module("def agent(prompt):\n    return 'built'\n")
    config = AgentConfig(type=AgentType.PYTHON, endpoint=f"{name}:agent")
    agent = build_agent(config, tmp_path)
    assert isinstance(agent, PythonAgent)
    assert agent.invoke("x").output == "built"
    agent.close()


# --------------------------------------------------------------------------- import errors


def import_error(tmp_path: Path, endpoint: str) -> str:
    with pytest.raises(ConfigError) as caught:
        python_agent(tmp_path, endpoint)
    (problem,) = caught.value.problems
    assert problem.path == "agent.endpoint"
    return problem.message


def test_a_missing_module(tmp_path: Path, write_module: Write) -> None:
    message = import_error(tmp_path, "no_such_agent_module:agent")
    assert 'cannot import "no_such_agent_module": no such module' in message
    assert str(tmp_path.resolve()) in message


def test_a_missing_attribute_suggests_a_name(tmp_path: Path, write_module: Write) -> None:
    name = write_module("def agent(prompt):\n    return ''\n")
    message = import_error(tmp_path, f"{name}:agnet")
    assert message == f'"{name}" has no attribute "agnet" (did you mean "agent"?)'


def test_a_missing_dependency_of_the_module(tmp_path: Path, write_module: Write) -> None:
    name = write_module("import no_such_dependency_xyz\n")
    message = import_error(tmp_path, f"{name}:agent")
    assert "ModuleNotFoundError: No module named 'no_such_dependency_xyz'" in message
    assert f"(at {name}.py:1)" in message


def test_a_syntax_error(tmp_path: Path, write_module: Write) -> None:
    name = write_module("def agent(prompt):\n    return (\n")
    message = import_error(tmp_path, f"{name}:agent")
    assert f"{name}.py:2: SyntaxError" in message


def test_an_exception_at_import_time_prints_no_traceback(
    tmp_path: Path, write_module: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = write_module("x = 1\nraise RuntimeError('no API key')\n")
    message = import_error(tmp_path, f"{name}:agent")
    assert message == f'importing "{name}" failed: RuntimeError: no API key (at {name}.py:2)'
    assert "Traceback" not in capsys.readouterr().err


def test_not_callable(tmp_path: Path, write_module: Write) -> None:
    name = write_module("agent = 42\n")
    assert "expected a function" in import_error(tmp_path, f"{name}:agent")


def test_a_class_that_cannot_be_created(tmp_path: Path, write_module: Write) -> None:
    name = write_module(
        """
        class Bot:
            def __init__(self, key):
                pass
        """
    )
    assert f'creating "{name}:Bot()" failed: TypeError' in import_error(tmp_path, f"{name}:Bot")


def test_locate_places_the_problem(tmp_path: Path) -> None:
    def locate(field: str, message: str) -> Problem:
        return Problem("cfg.yaml", 7, 3, field, message)

    config = AgentConfig(type=AgentType.PYTHON, endpoint="no_such_agent_module:agent")
    with pytest.raises(ConfigError) as caught:
        build_agent(config, tmp_path, locate=locate)
    assert str(caught.value).startswith("cfg.yaml:7:3: agent.endpoint: cannot import")


# --------------------------------------------------------------------------- console

CHATTY = """
import asyncio
import logging
import sys
import threading

LOCKSTEP = threading.Barrier(2)
log = logging.getLogger("chatty")
log.setLevel(logging.INFO)
print("imported")

def agent(prompt):
    print("out: " + prompt)
    LOCKSTEP.wait(timeout=10)  # the other invocation writes between these lines
    print("err: " + prompt, file=sys.stderr)
    LOCKSTEP.wait(timeout=10)
    log.warning("log: %s", prompt)
    return prompt

async def async_agent(prompt):
    await asyncio.sleep(0)
    sys.stdout.write("async out: " + prompt + "\\n")
    return prompt
"""


def test_each_invocation_keeps_what_it_printed_and_logged_apart_from_the_run(
    tmp_path: Path, write_module: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two invocations in lockstep on two threads: each keeps its own prints, stderr and
    logging (through logging's console handler), none reaches the real streams, and the log
    holds each under its invocation's id, with what the import printed."""
    name = write_module(CHATTY)
    handler = logging.StreamHandler(sys.stderr)  # a console handler made before the run
    logging.getLogger("chatty").addHandler(handler)
    log = tmp_path / "reports" / "agent.log"
    stdout, stderr = sys.stdout, sys.stderr
    try:
        with AgentConsole(log) as console:
            agent = PythonAgent(
                AgentConfig(type=AgentType.PYTHON, endpoint=f"{name}:agent"),
                tmp_path,
                console=console,
            )
            with ThreadPoolExecutor(2) as pool:
                calls = [Call("a[calm]#0.0", "calm"), Call("b[calm]#0.0", "calm")]
                replies = list(pool.map(lambda c: agent.invoke(c.cell_id[0], c), calls))
        assert (sys.stdout, sys.stderr) == (stdout, stderr)  # put back
        assert handler.stream is stderr
    finally:
        logging.getLogger("chatty").removeHandler(handler)
    assert [r.console for r in replies] == ["out: a\nerr: a\nlog: a", "out: b\nerr: b\nlog: b"]
    seen = capsys.readouterr()
    assert seen.out == "" and seen.err == ""
    blocks = log.read_text().split("==> ")
    assert blocks[:2] == ["", f"import of {name}:agent <==\nimported\n"]
    assert sorted(blocks[2:]) == [
        "a[calm]#0.0 <==\nout: a\nerr: a\nlog: a\n",
        "b[calm]#0.0 <==\nout: b\nerr: b\nlog: b\n",
    ]


def test_an_async_agents_console_is_kept_and_redacted(
    tmp_path: Path, write_module: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = write_module(CHATTY)
    log = tmp_path / "agent.log"
    with AgentConsole(log) as console, redacting(Redactor(["s3cr3t-key"])):
        config = AgentConfig(type=AgentType.PYTHON, endpoint=f"{name}:async_agent")
        reply = PythonAgent(config, tmp_path, console=console).invoke(
            "key s3cr3t-key", Call("c[calm]#0.0", "calm")
        )
    assert reply.output == "key s3cr3t-key"  # the reply is redacted with the results
    assert reply.console == "async out: key ***"
    assert log.read_text().endswith("==> c[calm]#0.0 <==\nasync out: key ***\n")
    assert "s3cr3t" not in capsys.readouterr().out


def test_the_console_excerpt_is_the_last_lines() -> None:
    text = "".join(f"line {i}\n" for i in range(30))
    assert excerpt(text) == "[10 earlier lines in the log]\n" + "\n".join(
        f"line {i}" for i in range(10, 30)
    )
    assert excerpt("x" * 3000) == "…" + "x" * 2000


def test_a_timed_out_invocation_keeps_what_it_wrote_before_and_drops_the_rest(
    tmp_path: Path, write_module: Write, capsys: pytest.CaptureFixture[str]
) -> None:
    name = write_module(
        """
        import threading
        GATE, DONE = threading.Event(), threading.Event()

        def agent(prompt):
            print("before the hang")
            GATE.wait(10)
            print("after the hang")
            DONE.set()
            return prompt
        """
    )
    log = tmp_path / "agent.log"
    with AgentConsole(log) as console:
        config = AgentConfig(type=AgentType.PYTHON, endpoint=f"{name}:agent", timeout=100)
        reply = PythonAgent(config, tmp_path, console=console).invoke("x", Call("c#0.0", "s"))
        assert reply.error is AgentErrorKind.TIMEOUT
        module = sys.modules[name]
        module.GATE.set()
        assert module.DONE.wait(10)
    assert reply.console == "before the hang"
    assert log.read_text() == (
        "==> c#0.0 (timed out: what it wrote later is not kept) <==\nbefore the hang\n"
    )
    assert "hang" not in capsys.readouterr().out  # nor does it reach the run's output
