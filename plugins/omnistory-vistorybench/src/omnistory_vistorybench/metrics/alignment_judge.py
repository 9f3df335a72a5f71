"""The VLM judge of prompt alignment, as the official ``bench/prompt_align`` asks it: the rubric
files, the messages (the shot's text and its image, base64 at 512x512), the OpenAI-compatible
client with the official retries (temperature 0, +0.1 after each unparsable answer) and the
official score regex.  Below :mod:`.prompt_align` (the metric) and :mod:`.single_action`
(single-character action, asked per matched crop); the openai SDK is imported in
:meth:`AlignmentJudge.load`.
"""

from __future__ import annotations

import base64
import io
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError
from omnistory_core.kit.retry import (
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
)

#: the official rubric file of each dimension (in ``bench/prompt_align/user_prompts``)
RUBRIC_FILES: dict[str, str] = {
    "scene": "user_prompt_environment_text_align.txt",
    "character_action": "user_prompt_character_text_align.txt",
    "camera": "user_prompt_camera_text_align.txt",
}
#: the rubric of single-character action (asked per matched character crop)
SINGLE_CHARACTER_RUBRIC = "user_prompt_single_character_text_align.txt"
SCORE_PATTERN = re.compile(r"(score|Score):\s*[a-zA-Z]*\s*(\d+)")
IMAGE_SIZE = (512, 512)
#: kept of each answer in a row's detail
MAX_DETAIL_CHARS = 2000


def parse_score(text: str | None) -> int | None:
    """The first ``Score: N`` of an answer (the official regex), or None."""
    found = SCORE_PATTERN.findall(text or "")
    return int(found[0][1]) if found else None


def image_base64(image: Any) -> str:
    """A path or PIL image as the official sends it: resized to 512x512 (PIL's default
    filter, in the file's own mode), then RGB, then JPEG at PIL's default quality, base64."""
    from PIL import Image

    if isinstance(image, str | os.PathLike):
        with Image.open(image) as img:
            return image_base64(img)
    img = image.resize(IMAGE_SIZE)
    if img.mode != "RGB":
        img = img.convert("RGB")
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def image_part(b64: str, detail: str | None = None) -> dict[str, Any]:
    url: dict[str, Any] = {"url": f"data:image/jpeg;base64,{b64}"}
    if detail:
        url["detail"] = detail
    return {"type": "image_url", "image_url": url}


def shot_messages(rubric: str, text: str, b64: str) -> list[dict[str, Any]]:
    """The one user message of a prompt-alignment question."""
    content = [{"type": "text", "text": rubric}, {"type": "text", "text": text}, image_part(b64)]
    return [{"role": "user", "content": content}]


def single_character_messages(
    rubric: str, script: str, character_name: str, crop_b64: str
) -> list[dict[str, Any]]:
    """The single-character-action question: the rubric as the system message, then the shot's
    script, the character's name and its crop (``detail: low``, as the official sends crops)."""
    return [
        {"role": "system", "content": [{"type": "text", "text": rubric}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": script},
                {"type": "text", "text": f"Evaluated Character Name is {character_name}"},
                image_part(crop_b64, detail="low"),
            ],
        },
    ]


def read_rubrics(rubric_dir: str | None, names: Mapping[str, str] = RUBRIC_FILES) -> dict[str, str]:
    """The rubric texts by dimension, or a ``skipped:`` ComponentError naming what is missing."""
    hint = "set rubric_dir= to <ViStoryBench checkout>/vistorybench/bench/prompt_align/user_prompts"
    if not rubric_dir:
        raise ComponentError(f"skipped: metric=prompt_align needs its rubric files; {hint}")
    folder = Path(os.path.expanduser(rubric_dir))
    missing = [f for f in names.values() if not (folder / f).is_file()]
    if missing:
        raise ComponentError(f"skipped: {folder} lacks {', '.join(missing)}; {hint}")
    return {dim: (folder / f).read_text(encoding="utf-8") for dim, f in names.items()}


def chat_base_url(base_url: str | None) -> str | None:
    """What the SDK takes as ``base_url``: the official posts to ``{base}/chat/completions`` when
    ``base`` ends in ``/v1`` and to ``{base}/v1/chat/completions`` otherwise."""
    if not base_url:
        return None
    base = base_url.rstrip("/")
    return base if base.endswith("/v1") else f"{base}/v1"


@dataclass
class Verdict:
    """One question's outcome: ``status`` is ``ok`` (parsed), ``unparsed`` (no score in
    ``tries`` answers) or ``error`` (the request failed)."""

    status: str
    score: int | None = None
    tries: int = 0
    temperatures: tuple[float, ...] = ()
    response: str = ""
    error: str = ""

    def detail(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "tries": self.tries}
        out["temperatures"] = list(self.temperatures)
        if self.response:
            out["response"] = self.response[:MAX_DETAIL_CHARS]
        if self.error:
            out["error"] = self.error
        return out


class JudgeCallError(Exception):
    """A request that failed after its retries."""


class AlignmentJudge:
    """The official query loop over the ``openai`` SDK."""

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str,
        model: str = "gpt-4.1",
        temperature: float = 0.0,
        temperature_step: float = 0.1,
        top_p: float | None = None,
        seed: int | None = 123,
        max_tokens: int = 512,
        max_tries: int = 10,
        timeout: float = 120.0,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.base_url = chat_base_url(base_url)
        self.api_key = api_key
        self.model = model
        self.temperature = temperature
        self.temperature_step = temperature_step
        self.top_p = top_p
        self.seed = seed
        self.max_tokens = max_tokens
        self.max_tries = max_tries
        self.timeout = timeout
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.client: Any = None
        self._unreachable: str | None = None
        self._lock = threading.Lock()

    def load(self) -> AlignmentJudge:
        import openai

        # the SDK's own retries are off: the project's retry policy is the only one
        self.client = openai.OpenAI(
            base_url=self.base_url, api_key=self.api_key, max_retries=0, timeout=self.timeout
        )
        self._unreachable = None
        return self

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def request(self, messages: list[dict[str, Any]], temperature: float) -> dict[str, Any]:
        """The Chat Completions arguments of one try (public for audits and tests)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": self.max_tokens,
        }
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        return kwargs

    def _classify(self, exc: BaseException) -> ErrorInfo:
        import openai

        return classify_api_error(
            exc,
            timeout_types=(openai.APITimeoutError,),
            connection_types=(openai.APIConnectionError,),
        )

    def complete(self, messages: list[dict[str, Any]], temperature: float) -> str:
        """One answer's text; raises :class:`JudgeCallError` after the retries."""
        import openai

        if self.client is None:
            self.load()
        text = ""
        for _ in range(self.policy.max_retries + 1):
            with self._lock:
                if self._unreachable:
                    raise JudgeCallError(f"server unreachable earlier: {self._unreachable}")
            kwargs = self.request(messages, temperature)
            outcome = call_with_retries(
                lambda kw=kwargs: self.client.chat.completions.create(**kw),
                self._classify,
                self.policy,
                sleep=self.sleep,
            )
            if outcome.error is not None:
                exc = outcome.exception
                if isinstance(exc, openai.APIConnectionError) and not isinstance(
                    exc, openai.APITimeoutError
                ):
                    with self._lock:
                        self._unreachable = outcome.error.message
                raise JudgeCallError(outcome.error.message)
            choices = getattr(outcome.value, "choices", None) or []
            text = (choices[0].message.content if choices else None) or ""
            if len(text) >= 2:  # the official re-asks shorter answers at the same temperature
                break
        return text

    def ask(self, messages: list[dict[str, Any]]) -> Verdict:
        """Ask until an answer parses, raising the temperature after each unparsable one."""
        temperature = self.temperature
        temperatures: list[float] = []
        text = ""
        for attempt in range(self.max_tries):
            temperatures.append(temperature)
            try:
                text = self.complete(messages, temperature)
            except JudgeCallError as exc:
                return Verdict("error", None, attempt + 1, tuple(temperatures), text, str(exc))
            score = parse_score(text)
            if score is not None:
                return Verdict("ok", score, attempt + 1, tuple(temperatures), text)
            temperature += self.temperature_step
        return Verdict("unparsed", None, self.max_tries, tuple(temperatures), text)


__all__ = [
    "AlignmentJudge",
    "IMAGE_SIZE",
    "JudgeCallError",
    "MAX_DETAIL_CHARS",
    "RUBRIC_FILES",
    "SCORE_PATTERN",
    "SINGLE_CHARACTER_RUBRIC",
    "Verdict",
    "chat_base_url",
    "image_base64",
    "image_part",
    "parse_score",
    "read_rubrics",
    "shot_messages",
    "single_character_messages",
]
