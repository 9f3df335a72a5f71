"""``image=nanobanana``: a Gemini image model (NanoBanana) through ``google-genai``.

One ``models.generate_content`` call per picture, one user turn whose parts are, in order, the
prompt as text, one JPEG ``inline_data`` part per reference image, then (when there is a previous
picture) the text ``previous_label`` (``last reference shot:``) and the previous picture: the
parts of ViStoryBench's official NanoBanana adaptation.  ``generationConfig`` asks for
``responseModalities [TEXT, IMAGE]`` and ``imageConfig {aspectRatio, imageSize}`` (16:9, 4K);
the answer's first ``inlineData`` part is the picture.  On Omni-StoryBench the current page is
the previous picture (conditioned on the page, as FLUX.1-Kontext is).

Retries, usage, prices and the key are :class:`~omnistory_core.kit.hosted_images.
HostedImageExpert`'s; the SDK's own retries stay off (its default).  A blocked prompt
(``promptFeedback.blockReason``) or a candidate stopped for safety is the item's ``refused``
failure with Gemini's reason; an answer with text but no image is ``empty_output``.

``image.batch=true`` sends the stage's requests through the Gemini Batch API instead (half
price, answered within 24 h; :mod:`omnistory_gemini_image.batch`): each inline request carries
the same parts and ``generationConfig`` as the synchronous one, so the cache keys are the same.
"""

from __future__ import annotations

from typing import Any

from omnistory_core.api import Param, with_defaults
from omnistory_core.kit.batches import BatchAPI, batch_parameters
from omnistory_core.kit.hosted_images import (
    HOSTED_IMAGE_PARAMETERS,
    DrawRequest,
    HostedImageExpert,
    ImageReply,
    image_size,
    jpeg_bytes,
)
from omnistory_core.kit.planning.usage import count_tokens
from omnistory_core.kit.retry import RETRYABLE_STATUSES, ErrorInfo, classify_api_error

#: the model of the official adaptation's default (its ViStoryBench mode Gemini3ProImagePreview)
DEFAULT_MODEL = "gemini-3-pro-image-preview"
#: finish reasons (and every prompt block reason) that mean Gemini declined to draw
DECLINED = frozenset(
    {
        "SAFETY",
        "IMAGE_SAFETY",
        "PROHIBITED_CONTENT",
        "IMAGE_PROHIBITED_CONTENT",
        "BLOCKLIST",
        "SPII",
        "RECITATION",
        "IMAGE_RECITATION",
    }
)
#: tokens Gemini bills per input image of at most 384 pixels a side, and per 768-pixel tile of a
#: larger one (Gemini API "image understanding" token rule), for the dry run's estimate
IMAGE_TILE_TOKENS = 258
#: output tokens billed per generated image, by image size, for the dry run's estimate (Gemini
#: API pricing page as read for gemini-3-pro-image-preview: 1120 up to 2K, 2000 at 4K; the 2.5
#: image models bill 1290 per image and take no size)
OUTPUT_IMAGE_TOKENS = {"1K": 1120, "2K": 1120, "4K": 2000, None: 1290}


def input_image_tokens(width: int, height: int) -> int:
    if width <= 384 and height <= 384:
        return IMAGE_TILE_TOKENS
    tiles = -(-width // 768) * -(-height // 768)
    return IMAGE_TILE_TOKENS * tiles


class NanoBanana(HostedImageExpert):
    """Gemini image generation (``generateContent``), prompt + references + previous picture."""

    name = "nanobanana"
    version = "1"
    description = "NanoBanana: a Gemini image model via google-genai (prompt + reference images)"
    sdk_module = "google.genai"
    requirements = ("google-genai>=3.3,<4",)
    api_key_hint = "your Gemini API key"
    batch_provider = "gemini"
    parameters = with_defaults(
        HOSTED_IMAGE_PARAMETERS,
        *batch_parameters("gemini"),
        Param("aspect_ratio", (str, None), "16:9", "imageConfig.aspectRatio; null: not sent"),
        Param(
            "image_size",
            (str, None),
            "4K",
            "imageConfig.imageSize (1K, 2K, 4K); null: not sent (the 2.5 image models take none)",
        ),
        Param(
            "previous_label",
            (str, None),
            "last reference shot:",
            "the text part sent before the previous picture; null: none",
        ),
        Param(
            "api_version",
            str,
            "v1beta",
            "the API version in the URL (the official adaptation's: v1beta)",
            runtime=True,
        ),
        Param(
            "response_modalities",
            list,
            ["TEXT", "IMAGE"],
            "generationConfig.responseModalities",
        ),
        model=DEFAULT_MODEL,
        api_key_env="GEMINI_API_KEY",
        timeout_s=1200.0,
        # the official adaptation sends the next shot without a previous one after a failure
        chain_after_failure="reset",
    )

    # -- client ---------------------------------------------------------------------------------
    def make_client(self, api_key: str) -> Any:
        from google import genai
        from google.genai import types

        options = types.HttpOptions(
            base_url=self.params["base_url"] or None,
            api_version=str(self.params["api_version"]),
            timeout=int(float(self.params["timeout_s"]) * 1000),
            retry_options=None,  # retries are HostedImageExpert's
        )
        return genai.Client(api_key=api_key, vertexai=False, http_options=options)

    # -- request --------------------------------------------------------------------------------
    def parts(self, request: DrawRequest) -> list[Any]:
        """The user turn's parts, in the official adaptation's order."""
        from google.genai import types

        quality = int(self.params["jpeg_quality"])

        def picture(data: Any) -> Any:
            blob = types.Blob(mime_type="image/jpeg", data=jpeg_bytes(data, quality))
            return types.Part(inline_data=blob)

        parts = [types.Part(text=request.prompt)]
        parts += [picture(ref) for ref in request.references]
        if request.previous is not None:
            if self.params["previous_label"]:
                parts.append(types.Part(text=str(self.params["previous_label"])))
            parts.append(picture(request.previous))
        return parts

    def generation_config(self) -> Any:
        from google.genai import types

        image: dict[str, Any] = {}
        if self.params["aspect_ratio"]:
            image["aspect_ratio"] = self.params["aspect_ratio"]
        if self.params["image_size"]:
            image["image_size"] = self.params["image_size"]
        return types.GenerateContentConfig(
            response_modalities=list(self.params["response_modalities"]),
            image_config=types.ImageConfig(**image) if image else None,
        )

    def send(self, client: Any, request: DrawRequest) -> ImageReply:
        from google.genai import types

        response = client.models.generate_content(
            model=self.model,
            contents=[types.Content(role="user", parts=self.parts(request))],
            config=self.generation_config(),
        )
        return reply_of(response)

    # -- the Gemini Batch API -----------------------------------------------------------------
    def batch_api(self, route: str) -> BatchAPI:
        from omnistory_gemini_image.batch import GeminiBatches

        return GeminiBatches(self.model)

    def batch_body(self, request: DrawRequest) -> dict[str, Any]:
        """The synchronous request as google-genai's ``InlinedRequest`` (JSON: images base64)."""
        from google.genai import types

        inline = types.InlinedRequest(
            contents=[types.Content(role="user", parts=self.parts(request))],
            config=self.generation_config(),
        )
        return inline.model_dump(mode="json", exclude_none=True)

    def batch_reply(self, response: Any) -> ImageReply:
        return reply_of(response)

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        from google.genai import errors

        if isinstance(exc, errors.APIError):
            status = int(exc.code)
            headers = getattr(getattr(exc, "response", None), "headers", None)
            from omnistory_core.kit.retry import parse_retry_after

            text = " ".join(str(exc.message or exc).split())[:500]
            return ErrorInfo(
                "timeout" if status in (408, 504) else "model_error",
                f"HTTP {status} {exc.status or ''}: {text}".replace("  ", " "),
                retryable=status in RETRYABLE_STATUSES,
                retry_after_s=parse_retry_after(headers),
                status=status,
            )
        import httpx

        return classify_api_error(
            exc,
            timeout_types=(httpx.TimeoutException,),
            connection_types=(httpx.TransportError,),
        )

    # -- the dry run ----------------------------------------------------------------------------
    def estimated_tokens(self, request: DrawRequest) -> tuple[int, int]:
        """Prompt and label text, each input image by Gemini's tile rule; the output image by
        :data:`OUTPUT_IMAGE_TOKENS` of ``image_size``."""
        tokens = count_tokens(request.prompt)
        pictures = list(request.references)
        if request.previous is not None:
            tokens += count_tokens(str(self.params["previous_label"] or ""))
            pictures.append(request.previous)
        for picture in pictures:
            tokens += input_image_tokens(*image_size(picture))
        size = self.params["image_size"]
        return tokens, OUTPUT_IMAGE_TOKENS.get(size, OUTPUT_IMAGE_TOKENS[None])


def reply_of(response: Any) -> ImageReply:
    """The first ``inlineData`` image of the answer with its token counts, or why there is none
    (a block reason or a safety finish reason: declined)."""
    meta = getattr(response, "usage_metadata", None)
    tokens_in = getattr(meta, "prompt_token_count", None)
    tokens_out = getattr(meta, "candidates_token_count", None)
    texts: list[str] = []
    reasons: list[str] = []
    for candidate in getattr(response, "candidates", None) or []:
        reason = getattr(candidate, "finish_reason", None)
        if reason is not None:
            reasons.append(str(getattr(reason, "value", reason)))
        content = getattr(candidate, "content", None)
        for part in getattr(content, "parts", None) or []:
            inline = getattr(part, "inline_data", None)
            if inline is not None and getattr(inline, "data", None):
                return ImageReply(bytes(inline.data), tokens_in, tokens_out)
            if getattr(part, "text", None):
                texts.append(str(part.text))
    feedback = getattr(response, "prompt_feedback", None)
    block = getattr(feedback, "block_reason", None)
    said = f"; the model said: {' '.join(texts)[:300]}" if texts else ""
    if block is not None:
        detail = getattr(feedback, "block_reason_message", None) or ""
        block = str(getattr(block, "value", block))
        message = f"prompt blocked: {block}{f' ({detail})' if detail else ''}{said}"
        return ImageReply(None, tokens_in, tokens_out, message, declined=True)
    declined = [r for r in reasons if r in DECLINED]
    if declined:
        return ImageReply(None, tokens_in, tokens_out, f"finish reason {declined[0]}{said}", True)
    finish = f" (finish reason {reasons[0]})" if reasons else ""
    return ImageReply(None, tokens_in, tokens_out, f"no image in the answer{finish}{said}")


__all__ = ["DEFAULT_MODEL", "NanoBanana", "reply_of"]
