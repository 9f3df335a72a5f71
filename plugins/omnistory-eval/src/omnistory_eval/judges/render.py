"""From one evaluation item to exactly what a judge receives.

:func:`render_prompt` is the single place where prompts are made; every backend (vLLM offline,
OpenAI-compatible servers, Transformers) starts from its result, and ``judges show-prompt`` prints
it.  Items are the evaluator-input mappings of :mod:`omnistory_core.components`
(``candidate_text``, ``current_image`` (a ``Media``), ``metadata``, ...).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omnistory_eval.judges import framing, prompts, specs
from omnistory_eval.judges.rubric import judge_json_schema

#: The evaluator inputs each track reads (names from ``components.EVALUATION_INPUTS``).
TRACK_READS: dict[str, tuple[str, ...]] = {
    "text": ("metadata", "conditions", "current_text", "reference_text", "candidate_text"),
    "image": ("metadata", "conditions", "current_image", "reference_image", "candidate_image"),
    "speech": ("metadata", "conditions", "reference_speech", "candidate_speech"),
    "omni": (
        "metadata",
        "conditions",
        "current_text",
        "reference_text",
        "candidate_text",
        "reference_speech",
        "current_image",
        "reference_image",
        "candidate_image",
        "candidate_speech",
    ),
}
_MEDIA_INPUTS = ("current_image", "reference_image", "candidate_image", "candidate_speech")
_TEXT_INPUTS = ("current_text", "reference_text", "candidate_text")


class JudgeInputError(ValueError):
    """An evaluation item lacks an input the judge needs, or has one of the wrong type."""


@dataclass(frozen=True)
class MediaRef:
    """One attachment, in the order the judge receives it."""

    kind: str  # "image" | "audio"
    path: str


@dataclass(frozen=True)
class RenderedPrompt:
    """What one judge receives for one item.

    ``messages`` is the judge's conversation (canonical text, model-specific order and
    directives) with media as content parts; chat APIs send it as it is.  ``template_messages``
    (InternVL) are the same messages flattened to strings with ``<image>`` placeholders, and
    ``prompt`` (MOSS-Audio, Kimi-Audio) the serialized conversation; offline backends use these
    when present.  ``media`` lists the attachments in order.
    """

    judge_id: str
    track: str
    messages: list[dict[str, Any]]
    media: tuple[MediaRef, ...]
    template_messages: list[dict[str, str]] | None = None
    prompt: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    json_schema: dict[str, Any] | None = None
    stop_token_ids: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge_id,
            "track": self.track,
            "messages": self.messages,
            "template_messages": self.template_messages,
            "prompt": self.prompt,
            "media": [{"kind": m.kind, "path": m.path} for m in self.media],
            "chat_template_kwargs": self.chat_template_kwargs,
            "json_schema": self.json_schema,
            "stop_token_ids": list(self.stop_token_ids),
        }


def _item_label(item: Mapping[str, Any]) -> str:
    for key in ("example_id", "id"):
        if item.get(key):
            return repr(item[key])
    return "(no example id)"


def _media_path(value: Any) -> str | None:
    if isinstance(value, (str, os.PathLike)):
        return os.fspath(value)
    path = getattr(value, "path", None)
    if isinstance(path, (str, os.PathLike)):
        return os.fspath(path)
    if isinstance(value, Mapping) and isinstance(value.get("path"), str):
        return value["path"]
    return None


def item_values(spec: specs.JudgeSpec, item: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs the judge's track needs, checked: media as paths, texts as strings."""
    values: dict[str, Any] = {}
    for name in TRACK_READS[spec.track]:
        where = f"judge {spec.id}: item {_item_label(item)}: input {name!r}"
        if name not in item or item[name] is None:
            raise JudgeInputError(f"{where} is missing")
        value = item[name]
        if name in _MEDIA_INPUTS:
            path = _media_path(value)
            if path is None:
                kind = type(value).__name__
                raise JudgeInputError(f"{where} must be a Media or a path, got {kind}")
            value = path
        elif name in _TEXT_INPUTS and not isinstance(value, str):
            raise JudgeInputError(f"{where} must be a string, got {type(value).__name__}")
        values[name] = value
    return values


def _canonical_messages(track: str, v: dict[str, Any]) -> list[dict[str, Any]]:
    if track == "text":
        return prompts.text_messages(
            metadata=v["metadata"],
            conditions=v["conditions"],
            current_text=v["current_text"],
            reference_text=v["reference_text"],
            candidate_text=v["candidate_text"],
        )
    if track == "image":
        return prompts.image_messages(
            metadata=v["metadata"],
            conditions=v["conditions"],
            current_image=v["current_image"],
            reference_image=v["reference_image"],
            candidate_image=v["candidate_image"],
        )
    if track == "speech":
        return prompts.speech_messages(
            metadata=v["metadata"],
            conditions=v["conditions"],
            reference_speech=v["reference_speech"],
            candidate_speech=v["candidate_speech"],
        )
    return prompts.omni_messages(
        metadata=v["metadata"],
        conditions=v["conditions"],
        current_text=v["current_text"],
        reference_text=v["reference_text"],
        candidate_text=v["candidate_text"],
        reference_speech=v["reference_speech"],
        current_image=v["current_image"],
        reference_image=v["reference_image"],
        candidate_image=v["candidate_image"],
        candidate_speech=v["candidate_speech"],
    )


def _media_of(messages: list[dict[str, Any]]) -> tuple[MediaRef, ...]:
    refs = []
    for message in messages:
        if isinstance(message["content"], list):
            for part in message["content"]:
                if part.get("type") in ("image", "audio"):
                    refs.append(MediaRef(part["type"], part[part["type"]]))
    return tuple(refs)


def render_prompt(judge_id: str, item: Mapping[str, Any]) -> RenderedPrompt:
    """Render ``item`` for judge ``judge_id`` (pure: reads no files)."""
    spec = specs.judge_spec(judge_id)
    values = item_values(spec, item)
    messages = _canonical_messages(spec.track, values)
    if spec.system_directive:
        messages = framing.with_system_directive(messages, spec.system_directive)
    template_messages = None
    prompt = None
    if spec.framing == specs.INTERNVL:
        template_messages = framing.flatten_with_image_placeholders(messages)
    elif spec.framing == specs.GEMMA4:
        messages = framing.gemma4_arrangement(messages)
    elif spec.framing in (specs.MOSS_AUDIO, specs.KIMI_AUDIO):
        speech_text = messages[0]["content"][0]["text"]
        serialize = (
            framing.moss_audio_prompt
            if spec.framing == specs.MOSS_AUDIO
            else framing.kimi_audio_prompt
        )
        prompt = serialize(speech_text)
    return RenderedPrompt(
        judge_id=spec.id,
        track=spec.track,
        messages=messages,
        media=_media_of(messages),
        template_messages=template_messages,
        prompt=prompt,
        chat_template_kwargs=dict(spec.chat_template_kwargs),
        json_schema=judge_json_schema(spec.track) if spec.json_schema_constrained else None,
        stop_token_ids=spec.stop_token_ids,
    )


def render_messages(judge_id: str, item: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The judge's messages for ``item`` (see :class:`RenderedPrompt` for the offline forms)."""
    return render_prompt(judge_id, item).messages
