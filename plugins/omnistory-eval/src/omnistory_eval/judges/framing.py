"""Model-specific framing of the canonical messages (App. E.4 "model-specific ..." paragraphs).

All functions are pure and leave the rubric and the four required keys untouched:

* :func:`with_system_directive`: Llama-Nemotron's ``/no_think`` line before the system message;
* :func:`flatten_with_image_placeholders`: InternVL's string messages with one ``<image>`` per
  attachment position;
* :func:`gemma4_arrangement`: Gemma 4's images-first integrated user message;
* :func:`moss_audio_prompt` / :func:`kimi_audio_prompt`: the serialized speech prompts.

Reasoning switches that live in the chat template (``thinking_budget=0``, ``enable_thinking=False``)
are carried as ``chat_template_kwargs`` by :mod:`.specs`, not written into the text.
"""

from __future__ import annotations

import copy
from typing import Any

IMAGE_PLACEHOLDER = "<image>"

MOSS_AUDIO_SYSTEM = "You are a helpful assistant."
MOSS_AUDIO_PLACEHOLDER = "<|audio_bos|><|AUDIO|><|audio_eos|>"
KIMI_AUDIO_PLACEHOLDER = "<|im_media_begin|><|im_kimia_text_blank|><|im_media_end|>"

GEMMA4_IMAGE_LABELS = (
    ("The next image is the current scene image.", "Image 1 above is the current scene image."),
    (
        "The next image is the ground-truth next-scene image.",
        "Image 2 above is the ground-truth next-scene image.",
    ),
    (
        "The next image is the generated candidate next-scene image.",
        "Image 3 above is the generated candidate next-scene image.",
    ),
)
_FINAL_INSTRUCTION = "Score all required criteria. Return JSON only."
_AUDIO_LABEL_TAG = "<generated_candidate_speech_audio>"


class FramingError(ValueError):
    """The canonical messages do not have the shape a model-specific framing expects."""


def with_system_directive(messages: list[dict[str, Any]], directive: str) -> list[dict[str, Any]]:
    """Put ``directive`` and a newline in front of the system message (added once)."""
    out = copy.deepcopy(messages)
    for message in out:
        if message.get("role") != "system":
            continue
        content = message["content"]
        if isinstance(content, str):
            if directive not in content:
                message["content"] = f"{directive}\n{content}"
        elif not any(directive in str(part.get("text", "")) for part in content):
            content.insert(0, {"type": "text", "text": directive})
        return out
    return [{"role": "system", "content": directive}, *out]


def flatten_with_image_placeholders(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    """InternVL: every message becomes one string, each image part one ``<image>``."""
    flat = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            text = content
        else:
            pieces = []
            for part in content:
                kind = part.get("type")
                if kind == "text":
                    pieces.append(str(part["text"]))
                elif kind == "image":
                    pieces.append(IMAGE_PLACEHOLDER)
                else:
                    raise FramingError(f"InternVL framing cannot place a {kind!r} part")
            text = "".join(pieces)
        flat.append({"role": message["role"], "content": text})
    return flat


def gemma4_arrangement(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Gemma 4: the three images first (current / reference / candidate), their labels changed to
    "Image 1/2/3 above", then the final scoring instruction, then the audio label and the audio."""
    out = copy.deepcopy(messages)
    user = next((m for m in out if m.get("role") == "user"), None)
    if user is None or not isinstance(user["content"], list):
        raise FramingError("Gemma 4 framing needs a user message with content parts")
    parts = user["content"]
    images = [p for p in parts if p.get("type") == "image"]
    audios = [p for p in parts if p.get("type") == "audio"]
    texts = [p for p in parts if p.get("type") == "text"]
    if len(images) != 3 or len(audios) != 1:
        raise FramingError(
            f"Gemma 4 framing needs three images and one audio clip, got {len(images)} and "
            f"{len(audios)}"
        )
    body, final, audio_label = [], None, None
    for part in texts:
        text = part["text"]
        if _FINAL_INSTRUCTION in text:
            final = part
        elif _AUDIO_LABEL_TAG in text:
            audio_label = part
        else:
            for old, new in GEMMA4_IMAGE_LABELS:
                text = text.replace(old, new)
            body.append({**part, "text": text})
    if final is None or audio_label is None:
        raise FramingError("Gemma 4 framing: the final instruction or the audio label is missing")
    user["content"] = [*images, *body, final, audio_label, *audios]
    return out


def moss_audio_prompt(speech_prompt: str) -> str:
    """MOSS-Audio's serialized conversation: default system turn, audio slot, then the rubric."""
    return (
        f"<|im_start|>system\n{MOSS_AUDIO_SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n{MOSS_AUDIO_PLACEHOLDER}\n{speech_prompt}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def kimi_audio_prompt(speech_prompt: str) -> str:
    """Kimi-Audio's serialized conversation: rubric, audio slot, then the assistant turn."""
    return (
        f"<|im_kimia_user_msg_start|>{speech_prompt}\n{KIMI_AUDIO_PLACEHOLDER}"
        "<|im_msg_end|><|im_kimia_assistant_msg_start|>"
    )
