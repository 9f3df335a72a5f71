"""The ``vllm_omni`` backend: Dynin-Omni behind a vLLM-Omni OpenAI-compatible server.

vLLM-Omni registers ``DyninOmniForConditionalGeneration`` as three stages (token2text,
token2image, token2audio) and serves it at ``POST /v1/chat/completions``.  What this backend sends
and reads, as learned from vLLM-Omni's Dynin example client and its chat serving code (facts, not a
tested contract -- no real server was available):

* request: one user turn holding the current page (``image_url`` data URL) and the same text
  prompt as the ``transformers`` backend, ``modalities: ["text", "image", "audio"]``, the
  per-example ``seed``, plus ``backbone.extra_body`` verbatim (vLLM-Omni reads stage settings such
  as ``sampling_params_list`` and Dynin runtime settings under ``additional_information`` there);
* response: one choice per output.  Text: ``message.content`` a string.  Image: ``message.content``
  a list of ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`` parts.
  Audio: ``message.audio.data``, the base64 of a WAV file.

Caveat: vLLM-Omni's Dynin stages run one task per request (t2t, i2t, t2i, i2i, t2s, ti2ti ...);
no TI2TIS joint task was found there, so a stock server may answer with fewer than three
modalities.  Whatever is missing is recorded as ``backbone_no_<modality>``.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import mimetypes
import os
from typing import Any

from omnistory_core.api import Audio, Failure
from omnistory_core.kit.retry import ErrorInfo, RetryPolicy, call_with_retries, classify_api_error
from omnistory_dynin.prompts import build_prompt, example_seed

BASE_URL_ENV = "OMNISTORY_DYNIN_BASE_URL"
#: the port of vLLM-Omni's Dynin serving example
DEFAULT_BASE_URL = "http://127.0.0.1:8091/v1"
#: sent as the key when none is configured (vLLM checks none by default); never a real key
NO_KEY = "EMPTY"
OUTPUT_MODALITIES = ["text", "image", "audio"]
MIN_SPEECH_SECONDS = 0.1


def image_data_url(path: str, data: bytes) -> str:
    mime = mimetypes.guess_type(path)[0] or "image/png"
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def request_kwargs(p: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``client.chat.completions.create`` for one example (pure)."""
    media = item["current_image"]
    prompt = build_prompt(
        item.get("metadata"), item.get("current_text") or "", item.get("conditions")
    )
    content = [
        {"type": "image_url", "image_url": {"url": image_data_url(media.path, media.read_bytes())}},
        {"type": "text", "text": prompt},
    ]
    kwargs: dict[str, Any] = {
        "model": p["served_model"] or p["model"],
        "messages": [{"role": "user", "content": content}],
        "modalities": list(OUTPUT_MODALITIES),
        "seed": example_seed(p["seed"], item),
    }
    if p["extra_body"]:
        kwargs["extra_body"] = json.loads(json.dumps(p["extra_body"]))
    return kwargs


def _field(value: Any, name: str) -> Any:
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def parse_response(body: dict[str, Any]) -> dict[str, list[Any]]:
    """Texts, image bytes and audio bytes found in a chat completion body (pure).

    A choice's string ``content`` is text; list ``content`` is read for ``image_url`` data URLs
    only (vLLM-Omni fills an image choice that has no image with a text part saying so, which is not
    narration); ``message.audio.data`` is base64 audio.
    """
    found: dict[str, list[Any]] = {"text": [], "image": [], "audio": [], "problems": []}
    for choice in body.get("choices") or []:
        message = _field(choice, "message") or {}
        content = _field(message, "content")
        if isinstance(content, str):
            if content.strip():
                found["text"].append(content.strip())
        elif isinstance(content, list):
            for part in content:
                if _field(part, "type") != "image_url":
                    continue
                url = _field(_field(part, "image_url") or {}, "url")
                if isinstance(url, str) and url.startswith("data:image"):
                    try:
                        found["image"].append(base64.b64decode(url.split(",", 1)[1]))
                    except (IndexError, binascii.Error, ValueError) as exc:
                        found["problems"].append(f"undecodable image data URL: {exc}")
        audio = _field(message, "audio")
        data = _field(audio, "data") if audio is not None else None
        if isinstance(data, str) and data:
            try:
                found["audio"].append(base64.b64decode(data + "=" * (-len(data) % 4)))
            except (binascii.Error, ValueError) as exc:
                found["problems"].append(f"undecodable audio data: {exc}")
    return found


def read_image(data: bytes) -> Any:
    """A decoded PNG/JPEG (RGB), or a Failure."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            return image.convert("RGB")
    except Exception as exc:  # noqa: BLE001 - any decoder error fails the image only
        return Failure("model_error", f"the server's image does not decode: {exc}")


def read_audio(data: bytes) -> Audio | Failure:
    """A decoded WAV as mono float32, or a Failure (too short, not finite, not audio)."""
    import numpy as np
    import soundfile as sf

    try:
        samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except Exception as exc:  # noqa: BLE001
        return Failure("model_error", f"the server's audio does not decode: {exc}")
    samples = samples.mean(axis=1) if samples.shape[1] > 1 else samples[:, 0]
    seconds = len(samples) / rate if rate > 0 else 0.0
    if rate <= 0 or seconds < MIN_SPEECH_SECONDS or not np.isfinite(samples).all():
        return Failure("empty_output", f"invalid speech waveform ({seconds:.3f} s at {rate} Hz)")
    return Audio(samples=np.clip(samples, -1.0, 1.0).astype(np.float32), sample_rate=int(rate))


def interpret(found: dict[str, list[Any]]) -> dict[str, Any]:
    """Per modality the value or a Failure (pure apart from decoding)."""
    problems = "; ".join(found["problems"])
    note = f" ({problems})" if problems else ""
    results: dict[str, Any] = {}
    results["text"] = (
        found["text"][0]
        if found["text"]
        else Failure("backbone_no_text", f"the server's response held no text{note}")
    )
    results["image"] = (
        read_image(found["image"][0])
        if found["image"]
        else Failure("backbone_no_image", f"the server's response held no image{note}")
    )
    results["speech"] = (
        read_audio(found["audio"][0])
        if found["audio"]
        else Failure("backbone_no_speech", f"the server's response held no audio{note}")
    )
    return results


class RemoteDynin:
    """The OpenAI client (and, with ``launch``, the server) of one backbone instance."""

    def __init__(self, p: dict[str, Any]):
        self.p = p
        self.client: Any = None
        self.server: Any = None
        self.launch_error: str | None = None
        self.policy = RetryPolicy(max_retries=int(p["max_retries"]))

    def base_url(self) -> str:
        if self.p["launch"]:
            return self._start_server()
        return self.p["base_url"] or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL

    def _start_server(self) -> str:
        from omnistory_core.api import ComponentError
        from omnistory_dynin.launcher import LaunchError, OmniServer

        if self.launch_error is not None:
            raise ComponentError(self.launch_error, category="model_error")
        if self.server is None or not self.server.running:
            p = self.p
            server = OmniServer(
                p["model"],
                executable=p["launch_executable"],
                host=p["launch_host"],
                port=p["launch_port"],
                args=list(p["launch_args"]),
                timeout_s=float(p["launch_timeout_s"]),
                log_path=p["launch_log"],
            )
            try:
                server.start()
            except LaunchError as exc:
                self.launch_error = f"backbone=dynin: the vLLM-Omni server did not start: {exc}"
                raise ComponentError(self.launch_error, category="model_error") from exc
            self.server = server
        return self.server.base_url

    def load(self) -> None:
        if self.client is None:
            import openai

            name = self.p["api_key_env"]
            key = os.environ.get(name) if name else None
            self.client = openai.OpenAI(
                api_key=key or NO_KEY,  # a placeholder keeps the SDK off $OPENAI_API_KEY
                base_url=self.base_url(),
                timeout=float(self.p["timeout_s"]),
                max_retries=0,  # retries (Retry-After honoured) are call_with_retries'
            )

    def unload(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.close()
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def classify(self, exc: BaseException) -> ErrorInfo:
        import openai

        return classify_api_error(
            exc,
            timeout_types=(openai.APITimeoutError,),
            connection_types=(openai.APIConnectionError,),
        )

    def run_example(self, item: dict[str, Any]) -> dict[str, Any]:
        """One request; ``{"text", "image", "speech"}`` (value or Failure) and ``usage``.  A request
        that fails after the retries raises :class:`ComponentError` (nothing to keep)."""
        from omnistory_core.api import ComponentError

        self.load()
        kwargs = request_kwargs(self.p, item)
        client = self.client
        outcome = call_with_retries(
            lambda: client.chat.completions.with_raw_response.create(**kwargs),
            self.classify,
            self.policy,
        )
        if outcome.error is not None:
            raise ComponentError(
                f"backbone=dynin: the vLLM-Omni request failed after {outcome.attempts} "
                f"attempt(s): {outcome.error.message}",
                category=outcome.error.category,
            )
        raw = outcome.value
        try:
            body = json.loads(raw.http_response.content)
        except ValueError as exc:
            raise ComponentError(f"backbone=dynin: the server's answer is not JSON: {exc}") from exc
        found = parse_response(body if isinstance(body, dict) else {})
        results = interpret(found)
        usage: dict[str, Any] = {
            "backend": "vllm_omni",
            "passes": 1,
            "requests": outcome.attempts,
            "retry_wait_s": round(outcome.waited_s, 3),
            "seed": kwargs["seed"],
            "choices": len(body.get("choices") or []) if isinstance(body, dict) else 0,
            "returned": {k: len(found[k]) for k in ("text", "image", "audio")},
        }
        tokens = body.get("usage") if isinstance(body, dict) else None
        if isinstance(tokens, dict):
            for key in ("prompt_tokens", "completion_tokens"):
                if isinstance(tokens.get(key), int):
                    usage[key] = tokens[key]
        return {**results, "usage": usage}


__all__ = [
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "RemoteDynin",
    "interpret",
    "parse_response",
    "request_kwargs",
]
