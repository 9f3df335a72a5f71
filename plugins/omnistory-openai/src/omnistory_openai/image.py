"""``image=gpt_image``: an OpenAI GPT image model through the Images API (OpenAI SDK).

With input images, one ``images.edit`` call (multipart/form-data) sends the prompt and every
input image as a JPEG file, in order: the references, then the previous picture (on
Omni-StoryBench the current page; on ViStoryBench the previous shot); without any, one
``images.generate`` call.  GPT image models take up to 16 input images and no 16:9 size: the
size is the standard one nearest ``aspect_ratio`` (16:9 -> ``1536x1024``) unless ``size`` names
one.  The answer's ``b64_json`` is the picture, ``usage`` its input and output tokens.

ViStoryBench published a GPT-4o row but no script for it: on ViStoryBench ``gpt_image`` runs the
same adaptation as the official Seedream one (merged prompt, first reference of every onstage
character, then the previous shot; a failed shot leaves the chain on the latest success), see
the plugin README.

Retries, usage, prices and the key are :class:`~omnistory_core.kit.hosted_images.
HostedImageExpert`'s.  A request refused by the moderation (HTTP 400 ``moderation_blocked`` /
``content_policy_violation``) is the item's ``refused`` failure with OpenAI's message.

``image.batch=true`` sends the stage's requests through OpenAI's Batch API instead (half price,
answered within 24 h; :mod:`omnistory_openai.image_batch`): edits to ``/v1/images/edits`` in the
JSON form (the same JPEG bytes as ``data:`` URLs, in the same order), generations to
``/v1/images/generations``; the same content as the synchronous requests, so the same cache keys.
"""

from __future__ import annotations

import base64
from typing import Any

from omnistory_core.api import Param, with_defaults
from omnistory_core.kit.batches import BatchAPI, batch_parameters
from omnistory_core.kit.hosted_images import (
    HOSTED_IMAGE_PARAMETERS,
    DrawRequest,
    HostedImageExpert,
    ImageReply,
    image_size,
    input_pictures,
    jpeg_bytes,
)
from omnistory_core.kit.planning.usage import count_tokens
from omnistory_core.kit.retry import ErrorInfo, classify_api_error
from omnistory_openai.image_batch import EDITS, GENERATIONS, REFUSAL_CODES, OpenAIImageBatches

#: the sizes every GPT image model takes (no 16:9 among them)
STANDARD_SIZES = ("1024x1024", "1536x1024", "1024x1536")
#: output tokens of one image at a standard size and quality, for the dry run's estimate (OpenAI
#: image generation guide's GPT image table, low / medium / high); an unset quality is
#: estimated as high (an upper bound)
OUTPUT_TOKENS = {
    "1024x1024": {"low": 272, "medium": 1056, "high": 4160},
    "1024x1536": {"low": 408, "medium": 1584, "high": 6240},
    "1536x1024": {"low": 400, "medium": 1568, "high": 6208},
}


def nearest_size(width: int, height: int, sizes: tuple[str, ...]) -> str:
    """Of ``sizes`` (``WxH``), the one whose aspect ratio is nearest ``width / height``."""

    def distance(size: str) -> float:
        w, h = (int(x) for x in size.split("x"))
        return abs(w / h - width / height)

    return min(sizes, key=distance)


def image_tokens_openai(width: int, height: int) -> int:
    """Input tokens of one image by OpenAI's vision tile rule (fit in 2048, shortest side 768,
    170 per 512 tile + 85): an assumption for GPT image inputs, whose own rule is not stated."""
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    tiles = -(-int(w) // 512) * -(-int(h) // 512)
    return 85 + 170 * tiles


def classify_openai(exc: BaseException) -> ErrorInfo:
    """The OpenAI SDK's errors; a moderation refusal is ``refused`` and never retried."""
    import openai

    code = getattr(exc, "code", None)
    if isinstance(exc, openai.APIStatusError) and code in REFUSAL_CODES:
        text = " ".join(str(getattr(exc, "message", exc)).split())[:500]
        return ErrorInfo(
            "refused", f"HTTP {exc.status_code} {code}: {text}", status=exc.status_code
        )
    return classify_api_error(
        exc,
        timeout_types=(openai.APITimeoutError,),
        connection_types=(openai.APIConnectionError,),
    )


def openai_client(params: dict[str, Any], api_key: str) -> Any:
    import openai

    return openai.OpenAI(
        api_key=api_key,
        base_url=params["base_url"] or None,
        timeout=float(params["timeout_s"]),
        max_retries=0,  # retries are HostedImageExpert's
    )


def decoded(response: Any) -> ImageReply:
    """The last image of an Images API answer with its usage (Seedream's relay answers a list
    and the official client takes its last item)."""
    usage = getattr(response, "usage", None)
    tokens_in = getattr(usage, "input_tokens", None)
    tokens_out = getattr(usage, "output_tokens", None)
    items = [d for d in getattr(response, "data", None) or [] if getattr(d, "b64_json", None)]
    if not items:
        return ImageReply(None, tokens_in, tokens_out, "no image in the answer's data")
    return ImageReply(base64.b64decode(items[-1].b64_json), tokens_in, tokens_out)


class GPTImage(HostedImageExpert):
    """OpenAI Images API: ``images.edit`` with every input image, else ``images.generate``."""

    name = "gpt_image"
    version = "1"
    description = "a GPT image model via the OpenAI Images API (edits with several input images)"
    sdk_module = "openai"
    requirements = ("openai>=3.57,<4",)
    api_key_hint = "your OpenAI API key"
    max_images = 16
    batch_provider = "openai"
    parameters = with_defaults(
        HOSTED_IMAGE_PARAMETERS,
        *batch_parameters("openai"),
        Param("aspect_ratio", str, "16:9", "W:H; the standard size nearest it is requested"),
        Param("size", (str, None), None, "WxH (or auto) sent as is; null: from aspect_ratio"),
        Param("quality", (str, None), None, "low | medium | high | auto; null: not sent"),
        Param("input_fidelity", (str, None), None, "low | high; null: not sent"),
        model="gpt-image-1.5",
        api_key_env="OPENAI_API_KEY",
    )

    def __init__(self, **params: Any):
        super().__init__(**params)
        ratio = str(self.params["aspect_ratio"])
        try:
            w, h = (float(x) for x in ratio.split(":"))
            assert w > 0 and h > 0
        except (ValueError, AssertionError):
            from omnistory_core.api import ParamError

            raise ParamError(
                f"image={self.name}: image.aspect_ratio must be W:H (e.g. 16:9), got {ratio!r}"
            ) from None
        self.size = self.params["size"] or nearest_size(
            int(w * 1000), int(h * 1000), STANDARD_SIZES
        )

    def output_params(self) -> dict[str, Any]:
        return {**super().output_params(), "resolved_size": self.size}

    def make_client(self, api_key: str) -> Any:
        return openai_client(self.params, api_key)

    def options(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "size": self.size, "n": 1}
        for key in ("quality", "input_fidelity"):
            if self.params[key] is not None:
                out[key] = self.params[key]
        return out

    def send(self, client: Any, request: DrawRequest) -> ImageReply:
        quality = int(self.params["jpeg_quality"])
        pictures = input_pictures(request)
        options = self.options()
        if not pictures:
            options.pop("input_fidelity", None)
            return decoded(client.images.generate(prompt=request.prompt, **options))
        files = [
            (f"image_{n:02d}.jpg", jpeg_bytes(p, quality), "image/jpeg")
            for n, p in enumerate(pictures)
        ]
        return decoded(client.images.edit(image=files, prompt=request.prompt, **options))

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        return classify_openai(exc)

    # -- the OpenAI Batch API -----------------------------------------------------------------
    def batch_route(self, request: DrawRequest) -> str:
        return EDITS if input_pictures(request) else GENERATIONS

    def batch_api(self, route: str) -> BatchAPI:
        return OpenAIImageBatches(route)

    def batch_body(self, request: DrawRequest) -> dict[str, Any]:
        """The synchronous request as JSON: an edit's images as JPEG ``data:`` URLs in order."""
        quality = int(self.params["jpeg_quality"])
        pictures = input_pictures(request)
        body: dict[str, Any] = {"prompt": request.prompt, **self.options()}
        if not pictures:
            body.pop("input_fidelity", None)
            return body
        encoded = (base64.b64encode(jpeg_bytes(p, quality)).decode("ascii") for p in pictures)
        body["images"] = [{"image_url": f"data:image/jpeg;base64,{data}"} for data in encoded]
        return body

    def batch_reply(self, response: Any) -> ImageReply:
        return decoded(response)

    def estimated_tokens(self, request: DrawRequest) -> tuple[int, int]:
        tokens = count_tokens(request.prompt)
        tokens += sum(image_tokens_openai(*image_size(p)) for p in input_pictures(request))
        table = OUTPUT_TOKENS.get(self.size, OUTPUT_TOKENS["1536x1024"])
        quality = self.params["quality"] if self.params["quality"] in table else "high"
        return tokens, table[quality]


__all__ = ["GPTImage", "STANDARD_SIZES", "classify_openai", "decoded", "openai_client"]
