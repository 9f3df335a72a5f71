"""The task contract: what a system receives and what it must return.

f(x_i, t_i, c_{i+1}) -> (image, narration, speech).  Everything here is plain data with no heavy
imports.  A `StoryExample` carries the reference; generation code never receives it: the engine
hands components an `ExampleInput` (built by `StoryExample.input_view()`), which has no reference
field at all, and reference-reading inputs are only ever assembled for components that declare
`oracle = True` in a run with `allow_oracle=true`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

EMOTIONS: tuple[str, ...] = ("angry", "happy", "neutral", "sad")
SPEEDS: tuple[str, ...] = ("slow", "normal", "fast")
PITCHES: tuple[str, ...] = ("low", "normal", "high")
GENDERS: tuple[str, ...] = ("female", "male")
LABELS: dict[str, tuple[str, ...]] = {
    "emotion": EMOTIONS,
    "speed": SPEEDS,
    "pitch": PITCHES,
    "gender": GENDERS,
}
MODALITIES: tuple[str, ...] = ("text", "image", "speech")
#: the failure category of a call still waiting in a provider batch (collected by the next run)
BATCH_PENDING = "batch_pending"

FailureCategory = Literal[
    "plan_json_error",
    "plan_missing_field",
    "plan_invalid_label",
    "unusable_image_prompt",
    "model_error",
    "empty_output",
    # the provider declined the request (its content policy): kept, not retried by
    # engine.retry_failures=errors, since the same request is declined again
    "refused",
    "timeout",
    "batch_pending",
    "upstream_failed",
    "not_produced",
    "backbone_no_text",
    "backbone_no_image",
    "backbone_no_speech",
    "contract_error",
]
FAILURE_CATEGORIES: tuple[str, ...] = get_args(FailureCategory)


@dataclass(frozen=True)
class Failure:
    """A failed output, kept as data (the paper's failure table is built from these)."""

    category: str
    message: str = ""
    #: for a component exception: its type name, and the innermost frame of the component's own
    #: code as ``path/in/package.py:LINE`` (so a plugin author sees where their code broke)
    exception: str | None = None
    where: str | None = None
    #: for a component exception: its full traceback as Python prints it, kept in the store's
    #: record and the job's ``records.jsonl`` (``where`` is the one frame a summary shows; this is
    #: the rest, for the author who has to find the bug without re-running the model)
    traceback: str | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, str]:
        data = {"category": self.category, "message": self.message}
        if self.exception:
            data["exception"] = self.exception
        if self.where:
            data["where"] = self.where
        if self.traceback:
            data["traceback"] = self.traceback
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Failure:
        return cls(
            category=str(data["category"]),
            message=str(data.get("message", "")),
            exception=data.get("exception") or None,
            where=data.get("where") or None,
            traceback=data.get("traceback") or None,
        )

    def describe(self) -> str:
        """The message with the code location, on one line (missing.txt, the failure summary)."""
        text = " ".join(self.message.split())
        return f"{text} (at {self.where})" if self.where else text


@dataclass(frozen=True)
class SpeechTarget:
    """One spoken character utterance with its four voice labels."""

    utterance: str
    speaker: str
    emotion: str
    speed: str
    pitch: str
    gender: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Plan:
    """The JSON-planning schema (schemas/plan.v1.schema.json): what a planner hands the experts."""

    narration: str
    image_prompt: str
    speech: SpeechTarget

    def to_dict(self) -> dict[str, Any]:
        return {
            "narration": self.narration,
            "image_prompt": self.image_prompt,
            "speech": self.speech.to_dict(),
        }


@dataclass(frozen=True)
class Page:
    """A storybook page: an illustration file and its narration."""

    image: str
    text: str


@dataclass(frozen=True)
class ExampleInput:
    """The input-only view of an example: exactly what a (non-oracle) system may see."""

    id: str
    index: int
    current: Page
    metadata: dict[str, Any]
    conditions: dict[str, Any]


@dataclass(frozen=True)
class Reference:
    """The gold next page and target speech; evaluation only."""

    next_page: Page
    speech: SpeechTarget


@dataclass(frozen=True)
class StoryExample:
    """One benchmark transition (page i -> page i+1).

    `index` is the row position in the dataset, which is also the candidate index of the official
    output layout (`text/<index>/generated.txt`).
    """

    id: str
    index: int
    source: str
    book: str
    from_key: str
    to_key: str
    current: Page
    metadata: dict[str, Any]
    conditions: dict[str, Any]
    reference: Reference = field(repr=False)
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def input_view(self) -> ExampleInput:
        return ExampleInput(
            id=self.id,
            index=self.index,
            current=self.current,
            metadata=self.metadata,
            conditions=self.conditions,
        )


@dataclass(frozen=True)
class PageOutput:
    """A system's continuation for one example: per modality an artifact path or a `Failure`."""

    example_id: str
    index: int
    text: str | Failure
    image: str | Failure
    speech: str | Failure

    def failures(self) -> dict[str, Failure]:
        return {m: v for m in MODALITIES if isinstance(v := getattr(self, m), Failure)}
