"""An HTTP agent process that exits (``os._exit``) on the request it cannot take: the agent of
the tests of blame when an agent goes down, which flakestorm starts (``agent.start``) and
starts again.

:func:`dying_agent` writes its script (``python agent.py PORT``). It prints ``agent up`` when
it starts and ``agent crashed under CELL`` when it dies, so a test reads from ``agent.log`` how
often it was started and under which cell it died.
"""

from __future__ import annotations

import textwrap

SCRIPT = """\
import json, os, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARK = "crashed-once"
ONCE, TAKES_DOWN = {once!r}, {takes_down!r}
changed = threading.Condition()
in_flight = []
print("agent up", flush=True)


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def handle_one(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        cell = self.headers.get("X-Flakestorm-Cell", "")
        if ({dies_on}) and not (ONCE and os.path.exists(MARK)):
            with changed:  # the first time, once the others it takes down are in flight
                if not os.path.exists(MARK):
                    changed.wait_for(lambda: len(in_flight) == TAKES_DOWN, timeout=10)
            open(MARK, "w").close()
            print("agent crashed under " + cell, flush=True)
            os._exit(1)
        if TAKES_DOWN and ({held}) and not os.path.exists(MARK):
            with changed:
                in_flight.append(cell)
                changed.notify_all()
            threading.Event().wait(10)  # until the process dies under it
        out = json.dumps({{"output": {reply}}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = handle_one


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def dying_agent(
    dies_on: str,
    *,
    once: bool = False,
    takes_down: int = 0,
    held: str = "True",
    reply: str = '"ok"',
) -> str:
    """The script of an agent that dies on a request for which ``dies_on`` holds (a python
    expression over the request's ``body`` bytes and its ``cell`` header), or only the first
    time with ``once``. With ``takes_down`` N, it dies the first time only once N other
    requests for which ``held`` holds are in flight, and holds those until then, so they go
    down with it. It answers every other request with ``{"output": <reply>}`` (an expression
    over ``body``)."""
    return textwrap.dedent(
        SCRIPT.format(dies_on=dies_on, once=once, takes_down=takes_down, held=held, reply=reply)
    )
