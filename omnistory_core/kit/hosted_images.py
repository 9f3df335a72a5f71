"""Hosted image models as image experts: the shared body of ``image=nanobanana``, ``seedream``,
``gpt_image`` and any plugin's own.

A hosted image expert draws one picture from a :class:`DrawRequest`: a text prompt, reference
images (in order) and optionally the *previous* picture of the story (the page the next one
continues, or the previous shot of a storyboard).  A subclass turns that request into its
provider's wire request through the provider's SDK (:meth:`HostedImageExpert.send`) and
classifies the SDK's errors; this class owns everything else, identically for all of them:

* parameters (:data:`HOSTED_IMAGE_PARAMETERS`): ``model``, ``base_url``, ``api_key_env`` (the
  NAME of the variable holding the key: the key never goes in a config), concurrency, timeouts,
  retries, prices;
* the page form: a task item with ``image_prompt`` and ``current_image`` (Omni-StoryBench) is
  drawn from the prompt, conditioned on the current page as the previous picture, as FLUX.1-Kontext
  is (:meth:`HostedImageExpert.page_request`); a task whose items are the shots of a story with
  reference images builds the request itself and calls :meth:`HostedImageExpert.draw`;
* retries on 408/409/425/429/5xx, timeouts and connection errors, honouring ``Retry-After``
  (:mod:`omnistory_core.kit.retry`; the SDKs' own retries are switched off); an answer without an
  image is asked again ``empty_retries`` times; a request the provider declines (its content
  policy) is the item's ``refused`` failure with the provider's message, never retried by
  ``engine.retry_failures=errors``;
* usage per call (:class:`~omnistory_core.components.ImageOutput`): attempts, waits, tokens where
  the provider reports them, ``images: 1`` and ``cost_usd`` from ``prices`` in the provider's unit
  (:class:`ImagePrice`: per image and/or per million input and output tokens);
* the dry run's price (:meth:`HostedImageExpert.pricing`, :meth:`HostedImageExpert.estimate`).

Input images go as JPEG of ``jpeg_quality`` (95, as the official ViStoryBench adaptations send
them).  Nothing here imports an SDK or PIL at module level.
"""

from __future__ import annotations

import importlib.util
import io
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar

from omnistory_core.components import ComponentError, ImageExpert, ImageOutput, Media
from omnistory_core.contract import Failure
from omnistory_core.kit.planning.usage import Pricing, count_tokens
from omnistory_core.kit.retry import (
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
    map_bounded,
)
from omnistory_core.params import Param, ParamError

#: what an image price may name (USD): per output image, per million input / output tokens
IMAGE_PRICE_FIELDS = ("per_image", "input_per_mtok", "output_per_mtok")
#: what the previous picture may be: a file, or the bytes of an image made in this process
Picture = Media | bytes

#: every hosted image expert's parameters (a subclass sets its defaults with ``with_defaults``)
HOSTED_IMAGE_PARAMETERS: tuple[Param, ...] = (
    Param("model", str, None, "model id sent to the API"),
    Param("base_url", (str, None), None, "API base URL; null: the SDK's default", runtime=True),
    Param(
        "api_key_env",
        (str, None),
        None,
        "NAME of the environment variable holding the API key (the key never goes in a config)",
        runtime=True,
    ),
    Param("max_concurrency", int, 4, "requests in flight at most", runtime=True, ge=1),
    Param("timeout_s", float, 300.0, "seconds per request", runtime=True, gt=0),
    Param("max_retries", int, 3, "retries after the first attempt", runtime=True, ge=0),
    Param(
        "retry_base_delay_s",
        float,
        2.0,
        "first backoff wait without Retry-After (doubles per retry)",
        runtime=True,
        gt=0,
    ),
    Param("retry_max_delay_s", float, 60.0, "longest backoff wait", runtime=True, gt=0),
    Param(
        "empty_retries",
        int,
        0,
        "ask again this many times when an answer holds no image (not when it is declined)",
        runtime=True,
        ge=0,
    ),
    Param(
        "prices",
        (dict, None),
        None,
        "USD in the provider's unit: {model: {per_image, input_per_mtok, output_per_mtok}} (any"
        " of them); null or a missing model: no cost recorded (never a cost of 0)",
        runtime=True,
    ),
    Param("jpeg_quality", int, 95, "input images are sent as JPEG of this quality", ge=1, le=100),
    Param(
        "story_chain",
        bool,
        True,
        "on a task whose items are the shots of a story: one call per story, each shot"
        " conditioned on the previous shot's output; false: one independent call per shot",
        key_at_default=False,
    ),
    Param(
        "chain_after_failure",
        str,
        "last_ok",
        "after a failed shot the next is conditioned on: last_ok (the latest shot that"
        " succeeded) | reset (no previous shot)",
        choices=("last_ok", "reset"),
        key_at_default=False,
    ),
)


# -- prices -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ImagePrice:
    """A hosted image model's price in the provider's unit; a field left out costs nothing."""

    per_image: float | None = None
    input_per_mtok: float | None = None
    output_per_mtok: float | None = None

    def cost(
        self, images: int, input_tokens: int | None, output_tokens: int | None
    ) -> float | None:
        """USD of a call making ``images`` images; None when a token rate is set and its count
        is unknown."""
        total = (self.per_image or 0.0) * images
        for rate, tokens in (
            (self.input_per_mtok, input_tokens),
            (self.output_per_mtok, output_tokens),
        ):
            if rate is None:
                continue
            if tokens is None:
                return None
            total += rate * tokens / 1e6
        return round(total, 10)


def parse_image_prices(raw: Any, where: str) -> dict[str, ImagePrice]:
    """A price table ``{model: {per_image, input_per_mtok, output_per_mtok}}``; ``null`` entries
    are left out (unknown price).  ``ValueError`` names the entry and field of a bad value."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(
            f"{where}: expected a mapping of model -> prices, got {type(raw).__name__}"
        )
    table: dict[str, ImagePrice] = {}
    for model, entry in raw.items():
        if entry is None:
            continue
        if not isinstance(entry, Mapping):
            raise ValueError(
                f"{where}.{model}: expected a mapping with {', '.join(IMAGE_PRICE_FIELDS)}"
            )
        unknown = sorted(str(k) for k in entry if k not in IMAGE_PRICE_FIELDS)
        if unknown:
            raise ValueError(
                f"{where}.{model}: unknown field(s) {', '.join(unknown)}; expected"
                f" {', '.join(IMAGE_PRICE_FIELDS)}"
            )
        values: dict[str, float] = {}
        for name in IMAGE_PRICE_FIELDS:
            value = entry.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{where}.{model}.{name}: expected a number >= 0, got {value!r}")
            values[name] = float(value)
        if values:
            table[str(model)] = ImagePrice(**values)
    return table


# -- requests and replies --------------------------------------------------------------------
@dataclass(frozen=True)
class DrawRequest:
    """What one picture is drawn from: the prompt, reference images in order, and the previous
    picture of the story (None: none)."""

    prompt: str
    references: tuple[Picture, ...] = ()
    previous: Picture | None = None


@dataclass
class ImageReply:
    """One answer: the image bytes (None: the answer holds none), the tokens the provider
    reported, and when there is no image why (``declined``: its content policy)."""

    data: bytes | None
    input_tokens: int | None = None
    output_tokens: int | None = None
    message: str = ""
    declined: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@lru_cache(maxsize=64)
def _jpeg_of(data: bytes, quality: int) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        rgb = img.convert("RGB")
    buf = io.BytesIO()
    rgb.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def picture_bytes(picture: Picture) -> bytes:
    return picture if isinstance(picture, bytes) else picture.read_bytes()


def jpeg_bytes(picture: Picture, quality: int = 95) -> bytes:
    """``picture`` re-encoded as JPEG of ``quality`` from its RGB pixels (an alpha channel is
    dropped); the same input gives the same bytes (cached for the story's repeated references)."""
    return _jpeg_of(picture_bytes(picture), int(quality))


def image_size(picture: Picture) -> tuple[int, int]:
    from PIL import Image

    with Image.open(io.BytesIO(picture_bytes(picture))) as img:
        return img.size


def decode_image(data: bytes) -> Any:
    """The provider's image bytes as an RGB ``PIL.Image.Image`` (ValueError when unreadable)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as img:
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"the answer's image cannot be read: {exc}") from None


# -- the expert -------------------------------------------------------------------------------
class HostedImageExpert(ImageExpert):
    """Base class of the hosted image experts (not registered itself); see the module doc."""

    version = "1"
    reads: ClassVar[tuple[str, ...]] = ("image_prompt", "current_image")
    default_batch_size = 16
    #: the module whose presence the preflight checks, and the pip requirement that brings it
    sdk_module: ClassVar[str] = "openai"
    requirements: ClassVar[tuple[str, ...]] = ()
    #: what the preflight error tells a user who has no key
    api_key_hint: ClassVar[str] = "your API key"
    #: the most input images one request may carry (None: no limit known)
    max_images: ClassVar[int | None] = None
    parameters = HOSTED_IMAGE_PARAMETERS

    def __init__(self, **params: Any):
        super().__init__(**params)
        if not str(self.params.get("model") or "").strip():
            raise ParamError(f"image={self.name}: image.model must be a model id")
        try:
            self._prices = parse_image_prices(
                self.params["prices"], f"image={self.name}: image.prices"
            )
        except ValueError as exc:
            raise ParamError(str(exc)) from None
        self._client: Any = None

    @property
    def model(self) -> str:
        return str(self.params["model"])

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=int(self.params["max_retries"]),
            base_delay_s=float(self.params["retry_base_delay_s"]),
            max_delay_s=float(self.params["retry_max_delay_s"]),
        )

    # -- secrets and lifecycle ------------------------------------------------------------------
    def preflight(self) -> None:
        """Before any item: the SDK is installed and the key's variable is set."""
        if importlib.util.find_spec(self.sdk_module.split(".")[0]) is None:
            need = " ".join(f"'{r}'" for r in self.requirements) or self.sdk_module
            raise ComponentError(
                f"the {self.sdk_module} package is not installed: pip install {need}"
            )
        name = self.params["api_key_env"]
        if not (name and os.environ.get(name)):
            raise ComponentError(
                f"no API key: environment variable {name} is not set (image.api_key_env names"
                f" it); export {name}=<{self.api_key_hint}>, or choose another image expert"
            )

    def _api_key(self) -> str:
        name = self.params["api_key_env"]
        value = os.environ.get(name) if name else None
        if not value:
            raise ComponentError(
                f"image={self.name}: no API key (environment variable {name} is not set); set the"
                " variable named by image.api_key_env"
            )
        return value

    def scrub(self, text: str) -> str:
        """``text`` without the key's value (error messages may echo a URL with it)."""
        name = self.params["api_key_env"]
        value = os.environ.get(name) if name else None
        if value and len(value) >= 4:
            text = text.replace(value, "***REDACTED***")
        return text

    def load(self) -> None:
        if self._client is None:
            self._client = self.make_client(self._api_key())

    def unload(self) -> None:
        client, self._client = self._client, None
        close = getattr(client, "close", None)
        if callable(close):
            close()

    # -- calls ----------------------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        self.load()
        return map_bounded(self._draw_item, items, int(self.params["max_concurrency"]))

    def run_one(self, item: dict[str, Any]) -> Any:
        return self.run_batch([item])[0]

    def page_request(self, item: Mapping[str, Any]) -> DrawRequest:
        """The request of a page item: its image prompt, conditioned on the current page as the
        previous picture (none when the item has no page)."""
        prompt = item.get("image_prompt")
        page = item.get("current_image")
        return DrawRequest(
            prompt=prompt if isinstance(prompt, str) else "",
            previous=page if isinstance(page, Media) else None,
        )

    def _draw_item(self, item: dict[str, Any]) -> ImageOutput | Failure:
        return self.draw(self.page_request(item))

    def check_request(self, request: DrawRequest) -> Failure | None:
        """Why ``request`` cannot be sent (no prompt, too many images), or None."""
        if not request.prompt.strip():
            return Failure("unusable_image_prompt", "the image prompt is empty")
        count = len(request.references) + (request.previous is not None)
        if self.max_images is not None and count > self.max_images:
            return Failure(
                "model_error",
                f"image={self.name}: {count} input images, more than the {self.max_images} one"
                f" request of {self.model} takes",
            )
        return None

    def draw(self, request: DrawRequest) -> ImageOutput | Failure:
        """One picture: the request sent with retries; the image with its usage, or why not."""
        problem = self.check_request(request)
        if problem is not None:
            return problem
        if self._client is None:
            self.load()
        client = self._client
        attempts, waited = 0, 0.0
        reply: ImageReply | None = None
        for _ in range(int(self.params["empty_retries"]) + 1):
            outcome = call_with_retries(
                lambda: self.send(client, request), self.classify_error, self.policy
            )
            attempts += outcome.attempts
            waited += outcome.waited_s
            if outcome.error is not None:
                tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
                return Failure(
                    outcome.error.category, self.scrub(f"{outcome.error.message} ({tries})")
                )
            reply = outcome.value
            if reply.data:
                try:
                    image = decode_image(reply.data)
                except ValueError as exc:
                    reply = ImageReply(None, reply.input_tokens, reply.output_tokens, str(exc))
                    continue
                return ImageOutput(image, self.usage(reply, attempts, waited))
            if reply.declined:
                break
        assert reply is not None
        category = "refused" if reply.declined else "empty_output"
        what = reply.message or "the answer holds no image"
        return Failure(category, self.scrub(f"image={self.name} ({self.model}): {what}"))

    def usage(self, reply: ImageReply, attempts: int, waited_s: float) -> dict[str, Any]:
        """One call's usage: attempts, waits, tokens where reported, the image and its cost."""
        usage: dict[str, Any] = {
            "calls": 1,
            "images": 1,
            "attempts": int(attempts),
            "retry_wait_s": round(float(waited_s), 6),
        }
        if reply.input_tokens is not None:
            usage["input_tokens"] = int(reply.input_tokens)
        if reply.output_tokens is not None:
            usage["output_tokens"] = int(reply.output_tokens)
        for key, value in reply.extra.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                usage[key] = value
        price = self._prices.get(self.model)
        cost = price.cost(1, reply.input_tokens, reply.output_tokens) if price else None
        if cost is None:
            usage["priced_calls"] = 0
        else:
            usage["cost_usd"] = cost
            usage["priced_calls"] = 1
        return usage

    # -- the dry run ----------------------------------------------------------------------------
    def pricing(self) -> Pricing:
        """The model's price from ``prices`` (else none, with what to set)."""
        price = self._prices.get(self.model)
        if price is not None:
            return Pricing(price, f"image={self.name}: image.prices")
        return Pricing(None, f"no price for model {self.model}: set image.prices")

    def estimate(
        self, inputs: dict[str, Any], pricing: Any, output_tokens: int | None
    ) -> dict[str, Any]:
        """One call's estimate: the requests it sends (a story call: one per shot), their
        tokens by :meth:`estimated_tokens` and their cost."""
        requests = self.requests_of(inputs)
        tokens_in = tokens_out = 0
        for request in requests:
            a, b = self.estimated_tokens(request)
            tokens_in, tokens_out = tokens_in + a, tokens_out + b
        estimate: dict[str, Any] = {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "images": len(requests),
        }
        price = getattr(pricing, "price", None)
        if isinstance(price, ImagePrice):
            cost = price.cost(len(requests), tokens_in, tokens_out)
            if cost is not None:
                estimate["cost_usd"] = cost
        return estimate

    def requests_of(self, inputs: Mapping[str, Any]) -> list[DrawRequest]:
        """The requests one call with ``inputs`` sends (the page form: one).  A prompt still to
        be written by a planner (the dry run's stand-in) counts as an empty text."""
        return [self.page_request(inputs)]

    def estimated_tokens(self, request: DrawRequest) -> tuple[int, int]:
        """(input, output) tokens of one request, as the provider bills them (0 where it bills
        per image); a subclass states its provider's rule."""
        return count_tokens(request.prompt), 0

    # -- subclass hooks -------------------------------------------------------------------------
    def make_client(self, api_key: str) -> Any:
        """The SDK client, its own retries off (the retries are this class's)."""
        raise NotImplementedError

    def send(self, client: Any, request: DrawRequest) -> ImageReply:
        """One API call; raise the SDK's exception on an HTTP error."""
        raise NotImplementedError

    def classify_error(self, exc: BaseException) -> ErrorInfo:
        """The SDK's exception as a failure category and a retry decision."""
        return classify_api_error(exc)


def input_pictures(request: DrawRequest) -> list[Picture]:
    """The request's images in the order every provider here sends them: the references, then
    the previous picture."""
    pictures: list[Picture] = list(request.references)
    if request.previous is not None:
        pictures.append(request.previous)
    return pictures


__all__ = [
    "HOSTED_IMAGE_PARAMETERS",
    "IMAGE_PRICE_FIELDS",
    "DrawRequest",
    "HostedImageExpert",
    "ImagePrice",
    "ImageReply",
    "Picture",
    "decode_image",
    "image_size",
    "input_pictures",
    "jpeg_bytes",
    "parse_image_prices",
    "picture_bytes",
]
