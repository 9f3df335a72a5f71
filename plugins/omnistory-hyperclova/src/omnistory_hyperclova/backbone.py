"""``backbone=hyperclova``: HyperCLOVA X SEED Omni 8B, any-to-any, through OmniServe (Track B).

OmniServe (github NAVER-Cloud-HyperCLOVA-X/OmniServe) serves the model behind an OpenAI-style
``POST /b/v1/chat/completions``; this backbone talks to it with the ``openai`` SDK.  One example is
three requests (see :mod:`omnistory_hyperclova.prompts`): text (narration + SPEECH line), image (the
``t2i_model_generation`` tool; the answer holds a signed PNG URL, downloaded and checked, up to
``image_attempts`` tries ``image_retry_delay_s`` apart) and speech (``message.audio.data`` holds the
base64 of a signed WAV URL, downloaded and decoded).

Failures are per modality, as in the benchmark's runner: no NARRATION fails the text and skips the
image ("image skipped: no narration available"); no SPEECH fails the speech and is never filled
from the narration; an expired or forbidden media URL fails only that modality.  When the text
request itself fails (an API error or timeout after the retries), nothing can follow from it and
the whole example fails with that error, so ``engine.retry_failures=true`` recomputes it.

Every request goes through :func:`omnistory_core.kit.retry.call_with_retries` (429/5xx/408,
timeouts and connection errors retried, ``Retry-After`` honoured; the SDK's own retries are off),
and examples run ``max_concurrency`` at a time.  The API key is read from the environment variable
named by ``api_key_env`` when the client is made and goes nowhere else.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from omnistory_core.api import Backbone, BackboneOutput, Failure, Param, ParamError
from omnistory_core.kit.planning.replies import TRUNCATION_REASONS
from omnistory_core.kit.retry import (
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
    map_bounded,
)
from omnistory_hyperclova import prompts as P
from omnistory_hyperclova.media import (
    Downloader,
    MediaError,
    env_or,
    image_url_for,
    read_audio,
    read_image,
)

BASE_URL_ENV = "OMNISTORY_HYPERCLOVA_BASE_URL"
DEFAULT_BASE_URL = "http://localhost:8000/b/v1"
#: sent as the key when the variable is unset (OmniServe checks none); never a real key
NO_KEY = "not-needed"
IMAGE_TRANSPORTS = ("data_url", "http")
TOOL_CHOICES = ("auto", "required", "named")

PARAMETERS: tuple[Param, ...] = (
    # -- output-changing (in the cache key) --
    Param("model", str, "track_b_model", "served model name (OmniServe's Track B model)"),
    Param("text_max_tokens", int, 2048, "max_tokens of the text request", ge=1),
    Param("image_max_tokens", int, 7000, "max_tokens of the image tool call (vision tokens)", ge=1),
    Param("speech_max_tokens", int, 2048, "max_tokens of the speech request", ge=1),
    Param(
        "reasoning",
        bool,
        True,
        "on: chat_template_kwargs {thinking: true} + thinking_token_budget; off: skip_reasoning",
    ),
    Param("thinking_token_budget", int, 1024, "reasoning-token cap (0: no cap, not sent)", ge=0),
    Param(
        "tool_choice",
        str,
        None,
        "image request's tool_choice: null = not sent (as the runner) | auto | required | named",
        choices=TOOL_CHOICES,
    ),
    Param("temperature", float, None, "null: the server's default (the runner sends none)"),
    Param("top_p", float, None, "null: the server's default"),
    Param("sampling_seed", int, None, "sent as the request's seed when set", ge=0),
    # -- runtime only --
    Param(
        "base_url",
        str,
        None,
        f"null: ${BASE_URL_ENV}, else {DEFAULT_BASE_URL}",
        runtime=True,
    ),
    Param(
        "api_key_env",
        str,
        "OMNISTORY_HYPERCLOVA_API_KEY",
        "NAME of the environment variable holding the key (optional: OmniServe checks none)",
        runtime=True,
    ),
    Param(
        "max_concurrency", int, 4, "examples in flight (three requests each)", runtime=True, ge=1
    ),
    Param("timeout_s", float, 600.0, "per chat request (seconds)", runtime=True, gt=0),
    Param("download_timeout_s", float, 120.0, "per media download (seconds)", runtime=True, gt=0),
    Param(
        "max_retries",
        int,
        3,
        "retries on 408/409/425/429/5xx, timeouts, connection errors",
        runtime=True,
        ge=0,
    ),
    Param("retry_base_delay_s", float, 1.0, "first retry delay (seconds)", runtime=True, gt=0),
    Param("retry_max_delay_s", float, 60.0, "longest retry delay (seconds)", runtime=True, gt=0),
    Param(
        "image_attempts", int, 10, "tries of request + download + image check", runtime=True, ge=1
    ),
    Param("image_retry_delay_s", float, 1.5, "seconds between image tries", runtime=True, ge=0),
    Param("speech_attempts", int, 1, "tries of the speech request + download", runtime=True, ge=1),
    Param("speech_retry_delay_s", float, 1.5, "seconds between speech tries", runtime=True, ge=0),
    Param(
        "image_transport",
        str,
        "data_url",
        "data_url (inline base64) | http (image_base_url + path under image_http_root)",
        runtime=True,
        choices=IMAGE_TRANSPORTS,
    ),
    Param("image_http_root", str, None, "directory served at image_base_url", runtime=True),
    Param("image_base_url", str, None, "URL image_http_root is served at", runtime=True),
)
#: the defaults (what the benchmark's HyperCLOVA runner does)
DEFAULTS: dict[str, Any] = {p.name: p.default for p in PARAMETERS}
RUNTIME: tuple[str, ...] = tuple(p.name for p in PARAMETERS if p.runtime)


def _nonempty_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_url(value: Any) -> bool:
    return _nonempty_str(value) and value.startswith(("http://", "https://"))


def check_params(name: str, p: dict[str, Any]) -> None:
    """What the declaration cannot say; one line naming ``backbone=<name>`` and the key."""
    problems = [
        ("model", _nonempty_str(p["model"]), "the served model name"),
        ("base_url", p["base_url"] is None or _is_url(p["base_url"]), "null or an http(s) URL"),
        (
            "api_key_env",
            p["api_key_env"] is None or _nonempty_str(p["api_key_env"]),
            "null or the NAME of an environment variable",
        ),
    ]
    for key, ok, expected in problems:
        if not ok:
            raise ParamError(f"backbone={name}: {key} must be {expected}, got {p[key]!r}")
    if p["image_transport"] == "http":
        for key in ("image_http_root", "image_base_url"):
            if not _nonempty_str(p[key]):
                raise ParamError(
                    f"backbone={name}: image_transport=http needs backbone.{key} (the directory "
                    "served over HTTP and the URL it is served at), got " + repr(p[key])
                )
        if not _is_url(p["image_base_url"]):
            raise ParamError(
                f"backbone={name}: image_base_url must be an http(s) URL,"
                f" got {p['image_base_url']!r}"
            )


@dataclass
class _Tally:
    """What one example's requests cost and what they said (kept in its usage record)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    reasoning_chars: int = 0
    truncated_calls: int = 0
    retry_wait_s: float = 0.0
    notes: dict[str, Any] = field(default_factory=dict)

    def add(self, response: Any, attempts: int, waited: float) -> None:
        self.requests += attempts
        self.retry_wait_s += waited
        usage = getattr(response, "usage", None)
        for attr, name in (
            ("prompt_tokens", "input_tokens"),
            ("completion_tokens", "output_tokens"),
        ):
            value = getattr(usage, attr, None)
            if isinstance(value, int) and not isinstance(value, bool):
                setattr(self, name, getattr(self, name) + value)
        details = getattr(usage, "completion_tokens_details", None)
        value = getattr(details, "reasoning_tokens", None)
        if isinstance(value, int) and not isinstance(value, bool):
            self.reasoning_tokens += value
        choice = (getattr(response, "choices", None) or [None])[0]
        if getattr(choice, "finish_reason", None) in TRUNCATION_REASONS:
            self.truncated_calls += 1
        message = getattr(choice, "message", None)
        for name in ("reasoning_content", "reasoning"):
            text = getattr(message, name, None)
            if text is None and message is not None:
                text = (getattr(message, "model_extra", None) or {}).get(name)
            if isinstance(text, str) and text:
                self.reasoning_chars += len(text)
                break

    def failed(self, attempts: int, waited: float) -> None:
        self.requests += attempts
        self.retry_wait_s += waited

    def to_usage(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "truncated_calls": self.truncated_calls,
            "retry_wait_s": round(self.retry_wait_s, 3),
            "reasoning_chars": self.reasoning_chars,
        }
        if self.reasoning_tokens:
            usage["reasoning_tokens"] = self.reasoning_tokens
        usage.update(self.notes)
        return usage


class _RequestFailed(Exception):
    def __init__(self, info: ErrorInfo, attempts: int):
        super().__init__(info.message)
        self.info = info
        self.attempts = attempts


class HyperClovaOmni(Backbone):
    """HyperCLOVA X SEED Omni 8B on OmniServe: narration, illustration and speech."""

    name = "hyperclova"
    version = "1"
    produces = frozenset({"text", "image", "speech"})
    reads = ("current_image", "current_text", "metadata", "conditions")
    parameters = PARAMETERS
    default_batch_size = 16
    description = (
        "HyperCLOVA X SEED Omni 8B (any-to-any) through an OmniServe Track B "
        "endpoint: three chat requests per example"
    )
    requirements: ClassVar[tuple[str, ...]] = (
        "openai>=3.57,<4",
        "httpx2",
        "soundfile>=0.12",
        "pillow>=10",
        "numpy>=1.24",
    )

    @classmethod
    def checkpoints(cls, params: dict[str, Any]) -> list[str]:
        """Nothing for ``prefetch``: the weights live with the OmniServe deployment, and
        ``model`` is a served name, not a hub id."""
        return []

    def __init__(self, **params: Any):
        super().__init__(**params)
        check_params(self.name, self.params)
        self._client: Any = None
        self._downloader: Downloader | None = None
        self._sleep: Callable[[float], None] = time.sleep

    # -- identity ------------------------------------------------------------------------------
    def output_params(self) -> dict[str, Any]:
        params = super().output_params()
        params["prompts_sha256"] = P.prompts_digest()
        return params

    @property
    def base_url(self) -> str:
        return self.params["base_url"] or env_or(BASE_URL_ENV, DEFAULT_BASE_URL)

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=int(self.params["max_retries"]),
            base_delay_s=float(self.params["retry_base_delay_s"]),
            max_delay_s=float(self.params["retry_max_delay_s"]),
        )

    # -- secrets -------------------------------------------------------------------------------
    def _key_value(self) -> str | None:
        name = self.params["api_key_env"]
        value = os.environ.get(name, "") if name else ""
        return value or None

    def _scrub(self, text: str) -> str:
        value = self._key_value()
        if value and len(value) >= 4 and value in text:
            text = text.replace(value, "***REDACTED***")
        return text

    # -- lifecycle -----------------------------------------------------------------------------
    def load(self) -> None:
        if self._client is None:
            import openai

            # An explicit placeholder keeps the SDK from falling back to $OPENAI_API_KEY (which
            # would send an unrelated key to this server).
            self._client = openai.OpenAI(
                api_key=self._key_value() or NO_KEY,
                base_url=self.base_url,
                timeout=float(self.params["timeout_s"]),
                max_retries=0,  # retries (with Retry-After) are call_with_retries'
            )
        if self._downloader is None:
            self._downloader = Downloader.create(float(self.params["download_timeout_s"]))

    def unload(self) -> None:
        client, self._client = self._client, None
        downloader, self._downloader = self._downloader, None
        for closable in (client, downloader):
            close = getattr(closable, "close", None)
            if callable(close):
                close()

    # -- calls ---------------------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        self.load()
        return map_bounded(self._run_example, items, int(self.params["max_concurrency"]))

    def run_one(self, item: dict[str, Any]) -> Any:
        return self.run_batch([item])[0]

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        import openai

        return classify_api_error(
            exc,
            timeout_types=(openai.APITimeoutError,),
            connection_types=(openai.APIConnectionError,),
        )

    def _sampling(self) -> dict[str, Any]:
        p = self.params
        kwargs: dict[str, Any] = {k: p[k] for k in ("temperature", "top_p") if p[k] is not None}
        if p["sampling_seed"] is not None:
            kwargs["seed"] = int(p["sampling_seed"])
        return kwargs

    def _request(self, tally: _Tally, **kwargs: Any) -> Any:
        """One chat completion with retries; raises :class:`_RequestFailed` when it cannot."""
        client = self._client
        kwargs = {
            "model": self.params["model"],
            "extra_body": P.reasoning_body(
                bool(self.params["reasoning"]), int(self.params["thinking_token_budget"])
            ),
            **self._sampling(),
            **kwargs,
        }
        outcome = call_with_retries(
            lambda: client.chat.completions.create(**kwargs),
            self.classify_error,
            self.policy,
            sleep=self._sleep,
        )
        if outcome.error is not None:
            tally.failed(outcome.attempts, outcome.waited_s)
            raise _RequestFailed(outcome.error, outcome.attempts)
        tally.add(outcome.value, outcome.attempts, outcome.waited_s)
        return outcome.value

    def _request_failure(self, what: str, exc: _RequestFailed) -> Failure:
        tries = f"{exc.attempts} attempt{'s' if exc.attempts != 1 else ''}"
        hint = ""
        rejected = re.search(r"HTTP (4(?!29)\d\d|5\d\d)", exc.info.message)
        if what == "text" and rejected and self.params["image_transport"] == "data_url":
            hint = (
                "; if the server cannot read inline images (stock OmniServe encoders fetch "
                "http(s)/s3 URLs only), set backbone.image_transport=http"
            )
        message = f"{what} request failed: {exc.info.message} ({tries}){hint}"
        return Failure(exc.info.category, self._scrub(message))

    def _run_example(self, item: dict[str, Any]) -> BackboneOutput | Failure:
        tally = _Tally()
        conditions = item.get("conditions") or {}
        metadata = item.get("metadata") or {}
        current_text = str(item.get("current_text") or "")
        media = item.get("current_image")
        if media is None:
            return Failure("model_error", "the example has no current image")
        try:
            page_url = image_url_for(
                media,
                self.params["image_transport"],
                self.params["image_http_root"],
                self.params["image_base_url"],
            )
        except ValueError as exc:
            return Failure("model_error", str(exc))
        image_part = {"type": "image_url", "image_url": {"url": page_url}}

        # (1) text: narration + the spoken line
        try:
            response = self._request(
                tally,
                messages=[
                    {
                        "role": "user",
                        "content": [
                            image_part,
                            {
                                "type": "text",
                                "text": P.text_prompt(current_text, metadata, conditions),
                            },
                        ],
                    }
                ],
                max_tokens=int(self.params["text_max_tokens"]),
            )
        except _RequestFailed as exc:
            return self._request_failure("text", exc)
        message = _first_message(response)
        raw = P.strip_reasoning(getattr(message, "content", None))
        answer = P.parse_text_answer(raw)
        tally.notes["text_answer"] = raw
        tally.notes["speech_line"] = answer.speech
        out = BackboneOutput()
        if answer.narration:
            out.text = answer.narration
        else:
            out.failures["text"] = (
                Failure("empty_output", "the model's text answer was empty")
                if not raw
                else Failure(
                    "backbone_no_text", f"no NARRATION in the model's text answer: {_excerpt(raw)}"
                )
            )

        # (2) image: needs the narration
        if not answer.narration:
            out.failures["image"] = Failure(
                "upstream_failed", "image skipped: no narration available"
            )
        else:
            prompt = P.image_prompt(current_text, answer.narration, metadata, conditions)
            result = self._image(tally, image_part, prompt)
            if isinstance(result, Failure):
                out.failures["image"] = result
            else:
                out.image = result

        # (3) speech: needs the SPEECH line, never the narration in its place
        if not answer.speech:
            out.failures["speech"] = Failure(
                "backbone_no_speech", "speech skipped: no SPEECH line in the model's text answer"
            )
        else:
            result = self._speech(tally, P.speech_prompt(answer.speech, conditions))
            if isinstance(result, Failure):
                out.failures["speech"] = result
            else:
                out.speech = result
        out.usage = tally.to_usage()
        return out

    def _attempts(
        self, what: str, attempts: int, delay: float, tally: _Tally, once: Callable[[], Any]
    ) -> Any:
        """Up to ``attempts`` tries of request + download + check, ``delay`` seconds apart."""
        errors: list[str] = []
        last: Failure | None = None
        for attempt in range(1, attempts + 1):
            tally.notes[f"{what}_attempts"] = attempt
            final = False
            try:
                result = once()
            except _RequestFailed as exc:
                # the request's own retries (429/5xx/timeouts, Retry-After) are spent, or it was
                # rejected (4xx): another attempt would only multiply them
                last, final = self._request_failure(what, exc), True
            except MediaError as exc:
                last = Failure(exc.category, self._scrub(str(exc)))
            except _FinalProblem as exc:
                last, final = Failure(exc.category, self._scrub(str(exc))), True
            else:
                if errors:
                    tally.notes[f"{what}_attempt_errors"] = errors
                return result
            errors.append(last.message)
            if final:
                break
            if attempt < attempts and delay > 0:
                self._sleep(delay)
        tally.notes[f"{what}_attempt_errors"] = errors
        assert last is not None
        tries = tally.notes[f"{what}_attempts"]
        if tries > 1:
            return Failure(last.category, f"{what} failed after {tries} attempts: {last.message}")
        return last

    def _image(self, tally: _Tally, image_part: dict[str, Any], prompt: str) -> Any:
        kwargs: dict[str, Any] = {
            "messages": [
                {"role": "system", "content": P.IMAGE_SYSTEM_PROMPT},
                {"role": "user", "content": [image_part, {"type": "text", "text": prompt}]},
            ],
            "tools": [P.IMAGE_TOOL],
            "max_tokens": int(self.params["image_max_tokens"]),
        }
        choice = self.params["tool_choice"]
        if choice == "named":
            kwargs["tool_choice"] = {"type": "function", "function": {"name": P.IMAGE_TOOL_NAME}}
        elif choice is not None:
            kwargs["tool_choice"] = choice

        def once() -> Any:
            ref = P.image_ref(_first_message(self._request(tally, **kwargs)))
            if ref.problem:
                category = "model_error" if ref.final else "backbone_no_image"
                if ref.final:
                    raise _FinalProblem(ref.problem, category)
                raise MediaError(ref.problem, category)
            assert self._downloader is not None and ref.url is not None
            data = self._downloader.fetch(ref.url, "image")
            image = read_image(data)
            tally.notes["image_url"] = P.redact_url(ref.url)
            return image

        return self._attempts(
            "image",
            int(self.params["image_attempts"]),
            float(self.params["image_retry_delay_s"]),
            tally,
            once,
        )

    def _speech(self, tally: _Tally, prompt: str) -> Any:
        kwargs = {
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": int(self.params["speech_max_tokens"]),
        }

        def once() -> Any:
            ref = P.audio_ref(_first_message(self._request(tally, **kwargs)))
            if ref.problem:
                if ref.final:
                    raise _FinalProblem(ref.problem, "model_error")
                raise MediaError(ref.problem, "backbone_no_speech")
            if ref.data is not None:
                return read_audio(ref.data)
            assert self._downloader is not None and ref.url is not None
            audio = read_audio(self._downloader.fetch(ref.url, "speech"))
            tally.notes["audio_url"] = P.redact_url(ref.url)
            return audio

        return self._attempts(
            "speech",
            int(self.params["speech_attempts"]),
            float(self.params["speech_retry_delay_s"]),
            tally,
            once,
        )


class _FinalProblem(Exception):
    """A problem that another attempt cannot fix (e.g. unsigned storage locations)."""

    def __init__(self, message: str, category: str):
        super().__init__(message)
        self.category = category


def _first_message(response: Any) -> Any:
    choices = getattr(response, "choices", None) or []
    return getattr(choices[0], "message", None) if choices else None


def _excerpt(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")


__all__ = ["DEFAULTS", "HyperClovaOmni", "RUNTIME", "check_params"]
