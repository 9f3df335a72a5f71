"""``image=seedream``: Seedream 4 through its OpenAI-style ``/images/generations`` endpoint.

One ``images.generate`` call of the OpenAI SDK per picture (the endpoint speaks the OpenAI
Images protocol; its own fields go in ``extra_body``), as ViStoryBench's official Seedream4
adaptation sends it:

* ``prompt`` = ``prompt_prefix`` (the official fixed sentence, glued to the prompt without a
  space) + the prompt, then a newline, ``Negative prompt: `` and ``negative_prompt`` (the official
  default list; null: no negative part);
* ``image`` = a JPEG ``data:`` URL per reference image, then one of the previous picture (no
  text label); left out when there is none;
* ``size`` (``4096x2304``, 16:9), ``response_format: b64_json``, ``stream: false``,
  ``watermark: false``, ``sequential_image_generation: disabled``; the answer's last ``data``
  item is the picture.

On Omni-StoryBench the current page is the previous picture.  Retries, usage (Seedream bills per
image: ``prices: {model: {per_image: ...}}``), the key and the dry run are
:class:`~omnistory_core.kit.hosted_images.HostedImageExpert`'s.  A request the endpoint declines
for sensitive content (HTTP 400 ``*SensitiveContentDetected``) is the item's ``refused``
failure with its message.
"""

from __future__ import annotations

import base64
from typing import Any

from omnistory_openai.image import classify_openai, decoded, openai_client

from omnistory_core.api import ComponentError, Param, with_defaults
from omnistory_core.kit.hosted_images import (
    HOSTED_IMAGE_PARAMETERS,
    DrawRequest,
    HostedImageExpert,
    ImageReply,
    input_pictures,
    jpeg_bytes,
)
from omnistory_core.kit.retry import ErrorInfo

#: the official adaptation's model id (Seedream 4.0 of 2025-08-28, as its relay names it)
DEFAULT_MODEL = "doubao-seedream-4-0-250828"
#: the official adaptation's fixed instruction, glued in front of the merged prompt
OFFICIAL_PREFIX = "Please generate the following required pictures based on the reference pictures."
#: the official adaptation's default negative list, appended to the text
OFFICIAL_NEGATIVE = (
    "(((deformed))), blurry, over saturation, bad anatomy, disfigured, poorly drawn face,"
    " mutation, mutated, (extra_limb), (ugly), (poorly drawn hands), fused fingers, messy"
    " drawing, broken legs censor, censored, censor_bar"
)
#: the endpoint's error codes of declined content
SENSITIVE = (
    "SensitiveContentDetected",
    "InputTextSensitiveContentDetected",
    "InputImageSensitiveContentDetected",
    "OutputImageSensitiveContentDetected",
)


def seedream_prompt(prompt: str, prefix: str, negative: str | None) -> str:
    """The text the official adaptation sends: prefix + prompt [+ newline + negative part]."""
    text = f"{prefix}{prompt}"
    return f"{text}\nNegative prompt: {negative}" if negative else text


class Seedream(HostedImageExpert):
    """Seedream 4 (OpenAI-style images endpoint with the reference ``image`` list)."""

    name = "seedream"
    version = "1"
    description = "Seedream 4 via its OpenAI-style images endpoint (reference image list)"
    sdk_module = "openai"
    requirements = ("openai>=3.57,<4",)
    api_key_hint = "your ModelArk (or relay) API key"
    no_batch_reason = (
        "Seedream's images endpoint has no batch mode (ModelArk's batch inference serves its chat"
        " API, not /images/generations)"
    )
    parameters = with_defaults(
        HOSTED_IMAGE_PARAMETERS,
        Param("size", str, "4096x2304", "WxH or 1K/2K/4K (official: 4096x2304, 16:9)"),
        Param(
            "prompt_prefix",
            str,
            OFFICIAL_PREFIX,
            "glued (no space) in front of every prompt (the official adaptation's)",
        ),
        Param(
            "negative_prompt",
            (str, None),
            OFFICIAL_NEGATIVE,
            "appended as a newline + 'Negative prompt: ' + this; null: nothing appended",
        ),
        Param("watermark", bool, False, "the endpoint's watermark field"),
        model=DEFAULT_MODEL,
        api_key_env="ARK_API_KEY",
        timeout_s=900.0,
    )

    def preflight(self) -> None:
        if not self.params["base_url"]:
            raise ComponentError(
                "image=seedream needs image.base_url, the OpenAI-style endpoint's base (e.g."
                " BytePlus ModelArk: https://ark.ap-southeast.bytepluses.com/api/v3, or the relay"
                " you use)"
            )
        super().preflight()

    def make_client(self, api_key: str) -> Any:
        return openai_client(self.params, api_key)

    def text(self, request: DrawRequest) -> str:
        return seedream_prompt(
            request.prompt, str(self.params["prompt_prefix"]), self.params["negative_prompt"]
        )

    def body(self, request: DrawRequest) -> dict[str, Any]:
        """The endpoint's own fields (sent in ``extra_body``)."""
        quality = int(self.params["jpeg_quality"])
        extra: dict[str, Any] = {
            "stream": False,
            "watermark": bool(self.params["watermark"]),
            "sequential_image_generation": "disabled",
        }
        pictures = input_pictures(request)
        if pictures:
            extra["image"] = [
                "data:image/jpeg;base64," + base64.b64encode(jpeg_bytes(p, quality)).decode("ascii")
                for p in pictures
            ]
        return extra

    def send(self, client: Any, request: DrawRequest) -> ImageReply:
        response = client.images.generate(
            model=self.model,
            prompt=self.text(request),
            size=str(self.params["size"]),
            response_format="b64_json",
            extra_body=self.body(request),
        )
        reply = decoded(response)
        usage = getattr(response, "usage", None)
        images = getattr(usage, "generated_images", None) if usage is not None else None
        if images is None and isinstance(getattr(usage, "model_extra", None), dict):
            images = usage.model_extra.get("generated_images")
        if isinstance(images, int):
            reply.extra["generated_images"] = images
        return reply

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        info = classify_openai(exc)
        code = str(getattr(exc, "code", "") or "")
        if info.status == 400 and code.endswith(SENSITIVE):
            return ErrorInfo("refused", f"{code}: {info.message}", status=400)
        return info

    def estimated_tokens(self, request: DrawRequest) -> tuple[int, int]:
        """Seedream bills per image: no tokens."""
        return 0, 0


__all__ = ["DEFAULT_MODEL", "OFFICIAL_NEGATIVE", "OFFICIAL_PREFIX", "Seedream", "seedream_prompt"]
