"""The judge tests' name for :mod:`omnistory_core.testing.servers` (kept importable).

``LocalChatServer(responder)`` is a :class:`~omnistory_core.testing.FakeServer` whose
``requests`` are the JSON bodies of the chat requests and whose answers count the words of the
reply as completion tokens, as judge tests and benchmarks expect.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omnistory_core.testing.servers import FakeServer, Reply
from omnistory_core.testing.servers import chat_completion as _chat_completion


def completion_body(model: str, content: str, finish_reason: str = "stop") -> dict[str, Any]:
    return _chat_completion(model, content, (1, max(len(content.split()), 1)), finish_reason)


class LocalChatServer(FakeServer):
    """``with LocalChatServer(responder) as server: OpenAI(base_url=server.base_url)``."""

    def __init__(self, responder: Callable[[dict[str, Any]], Reply], port: int = 0):
        # a fixed port lets a test bring a server up where an earlier run found none
        super().__init__(responder, usage=None, port=port)

    @property
    def requests(self) -> list[Any]:
        return self.bodies("chat")

    @property
    def max_in_flight(self) -> int:
        return self.peak_in_flight


__all__ = ["LocalChatServer", "Reply", "completion_body"]
