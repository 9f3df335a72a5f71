"""The ``vllm_omni`` backend: Qwen2.5-Omni behind vLLM-Omni's OpenAI-compatible chat completions.

Through the ``openai`` SDK at ``backbone.base_url`` (or a server this backend starts with
``backbone.launch=true``).  Speech is requested with ``modalities=["text", "audio"]``; vLLM-Omni
answers with one choice carrying the text and another carrying ``message.audio.data``, a base64
WAV at 24 kHz.  The current page goes as an ``image_url`` data URL, the pass-1 speech back as
``input_audio`` (the server's own WAV bytes).  The voice is the server's (vLLM-Omni takes no
speaker in the request), and the forced-speech fallback of the transformers backend is impossible
here (it needs a logits processor): a pass 1 without audio is a speech failure.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from omnistory_core.api import ComponentError, Media
from omnistory_qwen25omni.launcher import LaunchError, OmniServer
from omnistory_qwen25omni.media import data_url, image_mime, read_wav, wav_bytes
from omnistory_qwen25omni.replies import Reply, Speech


def openai_messages(
    messages: list[dict[str, Any]], image: Media | None, speech: Speech | None
) -> list[dict[str, Any]]:
    """Our conversation with its media parts as OpenAI content parts."""
    image_url = None
    if image is not None:
        data = image.read_bytes()
        image_url = data_url(data, image_mime(image.path, data))
    out = []
    for message in messages:
        parts = []
        for part in message["content"]:
            kind = part["type"]
            if kind == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "image":
                if image_url is None:
                    raise ComponentError("the conversation has an image part but no image")
                parts.append({"type": "image_url", "image_url": {"url": image_url}})
            elif kind == "audio":
                if speech is None:
                    raise ComponentError("the conversation has an audio part but no speech")
                wav = speech.wav or wav_bytes(speech.samples, speech.sample_rate)
                parts.append(
                    {
                        "type": "input_audio",
                        "input_audio": {
                            "data": base64.b64encode(wav).decode("ascii"),
                            "format": "wav",
                        },
                    }
                )
            else:  # pragma: no cover - prompts.py makes only these
                raise ComponentError(f"unknown content part {kind!r}")
        out.append({"role": message["role"], "content": parts})
    return out


def reply_from_completion(completion: Any) -> Reply:
    """Text from the first choice that has content, speech from the first that has audio."""
    text: str | None = None
    wav: bytes | None = None
    for choice in completion.choices or []:
        message = choice.message
        content = getattr(message, "content", None)
        if text is None and isinstance(content, str) and content:
            text = content
        audio = getattr(message, "audio", None)
        data = getattr(audio, "data", None) if audio is not None else None
        if wav is None and data:
            try:
                wav = base64.b64decode(data)
            except ValueError as exc:
                raise ComponentError(f"the server's audio is not base64: {exc}") from exc
    speech = None
    if wav:
        try:
            samples, rate = read_wav(wav)
        except Exception as exc:  # soundfile raises its own error types
            raise ComponentError(f"the server's audio is not a readable WAV: {exc}") from exc
        if samples.size:
            speech = Speech(samples=samples, sample_rate=rate, wav=wav)
    usage = getattr(completion, "usage", None)
    return Reply(
        text=(text or "").strip(),
        speech=speech,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
    )


class OmniServerRunner:
    """An OpenAI client for one vLLM-Omni server (started here when ``launch`` is set)."""

    def __init__(self, settings: Any):
        self.s = settings
        self.client: Any = None
        self.server: OmniServer | None = None

    def load(self) -> None:
        import openai

        s = self.s
        base_url = self._start_server() if s.launch else s.base_url
        key = os.environ.get(s.api_key_env) if s.api_key_env else None
        if s.api_key_env and not key:
            raise ComponentError(
                f"backbone=qwen25omni: the environment variable {s.api_key_env} (api_key_env) is "
                "not set"
            )
        self.client = openai.OpenAI(
            api_key=key or "EMPTY",  # the SDK wants a key; a server without --api-key ignores it
            base_url=base_url,
            timeout=float(s.timeout_s),
            max_retries=int(s.max_retries),
        )

    def _start_server(self) -> str:
        if self.server is None or not self.server.running:
            s = self.s
            server = OmniServer(
                s.model,
                executable=s.launch_executable,
                host=s.launch_host,
                port=s.launch_port,
                args=s.launch_args,
                timeout_s=s.launch_timeout_s,
                log_path=s.launch_log,
            )
            try:
                server.start()
            except LaunchError as exc:
                raise ComponentError(
                    f"backbone=qwen25omni: vLLM-Omni server did not start: {exc}"
                ) from exc
            self.server = server
        return self.server.base_url

    def unload(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            client.close()
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def chat(
        self,
        messages: list[dict[str, Any]],
        image: Media | None,
        speech: Speech | None,
        want_audio: bool,
        seed: int,
    ) -> Reply:
        import openai

        kwargs: dict[str, Any] = {
            "model": self.s.served_model_name or self.s.model,
            "messages": openai_messages(messages, image, speech),
            "modalities": ["text", "audio"] if want_audio else ["text"],
            "seed": int(seed),
        }
        if self.s.thinker_max_new_tokens:
            kwargs["max_tokens"] = int(self.s.thinker_max_new_tokens)
        try:
            completion = self.client.chat.completions.create(**kwargs)
        except openai.APITimeoutError as exc:
            raise ComponentError(f"vLLM-Omni request timed out: {exc}", category="timeout") from exc
        except openai.APIStatusError as exc:
            raise ComponentError(
                f"vLLM-Omni answered HTTP {exc.status_code}: {_error_message(exc)}"
            ) from exc
        except openai.APIConnectionError as exc:
            raise ComponentError(
                f"cannot reach vLLM-Omni at {self.client.base_url}: {exc}"
            ) from exc
        return reply_from_completion(completion)

    def speak(self, quote: str, seed: int) -> Reply | None:
        return None  # no logits processors over the API: see the module docstring


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return str(getattr(exc, "message", exc))
