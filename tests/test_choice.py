"""Which channel a run's faults take (:mod:`flakestorm.chaos.channels.choice`), and the proxy it
starts:
``proxy.port`` pins the port of the proxy flakestorm starts itself (SPEC §2.5)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from support.config_text import load

from flakestorm.engine.runner import run_phases
from flakestorm.errors import UsageError
from flakestorm.loader import load_config_text

DEAD = "http://127.0.0.1:9"


def config(port: int, **proxy: object) -> str:
    doc = {
        "agent": {"endpoint": f"{DEAD}/chat", "ready_timeout": 200},
        "golden_prompts": ["hi"],
        "proxy": {"port": port, "tools": {"quotes": DEAD}, **proxy},
        "contract": {
            "name": "c",
            "invariants": [{"id": "a", "type": "output_not_empty"}],
            "chaos_matrix": [
                {"name": "down", "tool_faults": [{"tool": "quotes", "mode": "error"}]}
            ],
        },
    }
    return json.dumps(doc)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_proxy_flakestorm_starts_listens_on_proxy_port(tmp_path: Path) -> None:
    port = free_port()
    notices: list[str] = []
    loaded = load_config_text(config(port), base_dir=tmp_path)
    run_phases(loaded, ["contract"], on_notice=notices.append)  # the agent never answers
    assert f"chaos proxy (in-process) listening on http://127.0.0.1:{port}" in notices


def test_a_proxy_port_in_use_is_refused_naming_it(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        loaded = load_config_text(config(port), base_dir=tmp_path)
        with pytest.raises(UsageError, match=f"cannot listen on 127.0.0.1:{port}"):
            run_phases(loaded, ["contract"])


def test_proxy_port_beside_proxy_url_is_a_warning() -> None:
    loaded = load(config(8081, url="http://flakestorm-proxy:8080"))
    assert [str(w).split(": ", 1)[1] for w in loaded.warnings] == [
        "proxy.port: proxy.port is the port of a proxy flakestorm starts itself; with proxy.url "
        "the proxy service is used, so it is ignored"
    ]
