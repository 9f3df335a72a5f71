"""What every judge backend does: turn rendered prompts into raw answers, one per prompt.

This module imports no concrete backend: :mod:`~omnistory_eval.judges.backends.registry`
names them (``BACKENDS``) and imports the chosen one when it is created (``create_backend``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from omnistory_eval.judges.render import RenderedPrompt
from omnistory_eval.judges.specs import JudgeSpec


@dataclass
class Generation:
    """One raw answer, or why there is none (``error`` set: an inference failure).

    ``error_kind``: ``"request"`` when the request itself was rejected (its content: HTTP 400, an
    unreadable attachment, a prompt over the context) and would fail again; ``None`` for every
    other failure (server down, timeout, out of memory), which the next run retries."""

    text: str | None
    error: str | None = None
    error_kind: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "error": self.error,
            "error_kind": self.error_kind,
            "finish_reason": self.finish_reason,
            "usage": self.usage,
            "attempts": self.attempts,
        }


def exception_generation(exc: BaseException) -> Generation:
    """The :class:`Generation` of a prompt the backend raised on: rejected for its content when the
    exception is about the input (see :mod:`omnistory_eval.outcomes`), else an error."""
    from omnistory_eval.outcomes import describe_exception, is_item_exception

    kind = "request" if is_item_exception(exc) else None
    return Generation(text=None, error=describe_exception(exc), error_kind=kind)


@dataclass(frozen=True)
class Decoding:
    """First-pass decoding settings (App. E.3.1): greedy, top-p 1, no repetition penalty."""

    temperature: float
    top_p: float
    repetition_penalty: float
    seed: int
    max_new_tokens: int

    @classmethod
    def from_spec(cls, spec: JudgeSpec, params: dict[str, Any]) -> Decoding:
        base = spec.decoding()
        base.update({k: params[k] for k in base if params.get(k) is not None})
        return cls(
            temperature=float(base["temperature"]),
            top_p=float(base["top_p"]),
            repetition_penalty=float(base["repetition_penalty"]),
            seed=int(base["seed"]),
            max_new_tokens=int(base["max_new_tokens"]),
        )


class Backend(Protocol):
    """A loaded judge model behind some inference stack."""

    def load(self) -> None: ...

    def generate(self, prompts: list[RenderedPrompt]) -> list[Generation]:
        """One :class:`Generation` per prompt, same order; never raises for one bad prompt."""
        ...

    def close(self) -> None: ...
