"""A chat-only view of :class:`~omnistory_testkit.servers.FakeServer` for judge tests.

``LocalChatServer(responder)`` records the JSON bodies of Chat Completions requests
(``requests``) and counts the words of each reply as its completion tokens, which is what the
judge tests and the judge benchmarks read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omnistory_testkit.servers import FakeServer, Reply, chat_completion


def completion_body(model: str, content: str, finish_reason: str = "stop") -> dict[str, Any]:
    """A Chat Completions body whose completion tokens are the reply's word count."""
    return chat_completion(model, content, (1, max(len(content.split()), 1)), finish_reason)


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


__all__ = ["LocalChatServer", "completion_body"]
