"""FinBot with a meddler beside it in its container: the agent under test trying to change its
own chaos, as an agent with an HTTP tool steered by a prompt injection could.

It runs FinBot as the image would, and for as long as the container lives it calls the chaos
proxy's control API (the address it knows from ``OPENAI_BASE_URL``, as any agent behind the
proxy does) to clear the active scenario and reset the proxy. Each new (call, answer) it
meets is reported to the fake GitHub API on the job's network as ``GET
/meddled/<METHOD>/<route>/<status>`` (``down`` while the proxy is not up yet), so the test
reads what the proxy answered.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

CALLS = (("DELETE", "scenario"), ("POST", "reset"))
REPORT = "http://github-api:9000/meddled"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def status_of(method: str, url: str) -> str:
    request = urllib.request.Request(url, data=b"" if method == "POST" else None, method=method)
    try:
        with opener.open(request, timeout=2) as response:
            return str(response.status)
    except urllib.error.HTTPError as exc:
        return str(exc.code)
    except OSError:
        return "down"


def meddle(proxy: str, stop: threading.Event) -> None:
    seen: set[tuple[str, str, str]] = set()
    while not stop.wait(0.2):
        for method, route in CALLS:
            status = status_of(method, f"{proxy}/_flakestorm/{route}")
            if (method, route, status) not in seen:
                seen.add((method, route, status))
                status_of("GET", f"{REPORT}/{method}/{route}/{status}")


def main() -> int:
    base = urllib.parse.urlsplit(os.environ.get("OPENAI_BASE_URL", "http://flakestorm-proxy:8080"))
    proxy = f"{base.scheme}://{base.netloc}"
    agent = subprocess.Popen(
        [sys.executable, "/app/run_local.py", "--host", "0.0.0.0", "--port", "8000"]
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: agent.terminate())
    threading.Thread(target=meddle, args=(proxy, stop), daemon=True).start()
    code = agent.wait()
    stop.set()
    return code


if __name__ == "__main__":
    sys.exit(main())
