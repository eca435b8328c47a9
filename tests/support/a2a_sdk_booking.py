"""The booking agent of :mod:`support.a2a_booking`, served by the official ``a2a-sdk`` (its
``AgentExecutor``, request handler, task store and Starlette routes, under uvicorn on
127.0.0.1, port 0): every ``SendMessage`` creates a task, completed with the artifact
``booked: <text>``, counted per message text.

::

    with SdkBookingAgent() as booking:
        booking.url, booking.created["Book a table (failed)"]
"""

from __future__ import annotations

import socket
import threading
from collections import Counter
from types import TracebackType

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette


class _Booking(AgentExecutor):
    def __init__(self) -> None:
        self.created: Counter[str] = Counter()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        self.created[text] += 1
        task = context.current_task
        if task is None:
            assert context.message is not None
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([Part(text=f"booked: {text}")])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("a booking cannot be canceled")


class SdkBookingAgent:
    """The agent; a context manager."""

    def __init__(self) -> None:
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen()  # a request before uvicorn serves waits in the backlog
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._executor = _Booking()
        card = AgentCard(
            name="booking",
            description="Books tables",
            version="1",
            supported_interfaces=[
                AgentInterface(url=self.url, protocol_binding="JSONRPC", protocol_version="1.0")
            ],
            capabilities=AgentCapabilities(streaming=False),
            skills=[AgentSkill(id="book", name="book", description="Books a table", tags=["book"])],
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
        )
        handler = DefaultRequestHandler(self._executor, InMemoryTaskStore(), card)
        routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")]
        config = uvicorn.Config(Starlette(routes=routes), log_level="error", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def created(self) -> Counter[str]:
        return self._executor.created

    def __enter__(self) -> SdkBookingAgent:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()
