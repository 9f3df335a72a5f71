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
* the dry run's price (:meth:`HostedImageExpert.pricing`, :meth:`HostedImageExpert.estimate`);
* provider batches (``batch=true``, where the provider has a batch API: ``batch_provider``, the
  ``batch_*`` hooks): the stage's requests through :mod:`omnistory_core.kit.image_batches` at
  half price; the same requests, so the same cache keys.  An expert without one refuses
  ``batch=true`` when it is built.

Input images go as JPEG of ``jpeg_quality`` (95, as the official ViStoryBench adaptations send
them).  Nothing here imports an SDK or PIL at module level.  The request and reply types and the
picture helpers live in :mod:`omnistory_core.kit.image_requests`, the price table in
:mod:`omnistory_core.kit.image_prices`; both are re-exported here.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from omnistory_core.components import ComponentError, ImageExpert, ImageOutput, Media
from omnistory_core.contract import Failure
from omnistory_core.kit.batches import (
    BATCH_DISCOUNT,
    BATCH_MODE_BATCH_SIZE,
    BatchAPI,
    public_url,
)
from omnistory_core.kit.image_batches import BatchDrawer, RequestError
from omnistory_core.kit.image_prices import (
    IMAGE_PRICE_FIELDS,
    ImagePrice,
    ImagePricing,
    parse_image_prices,
)
from omnistory_core.kit.image_requests import (
    DrawRequest,
    ImageReply,
    Picture,
    decode_image,
    image_size,
    input_pictures,
    jpeg_bytes,
    picture_bytes,
)
from omnistory_core.kit.planning.usage import count_tokens
from omnistory_core.kit.retry import (
    ErrorInfo,
    RetryPolicy,
    call_with_retries,
    classify_api_error,
    map_bounded,
)
from omnistory_core.params import Param, ParamError

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
    #: the provider batch API behind ``batch=true`` (a key of PROVIDER_APIS); None: none
    batch_provider: ClassVar[str | None] = None
    #: why there is no batch mode, for the error of ``batch=true`` on an expert without one
    no_batch_reason: ClassVar[str] = "its provider has no batch API"
    parameters = HOSTED_IMAGE_PARAMETERS

    def __init__(self, **params: Any):
        if "batch" in params and not any(p.name == "batch" for p in self.parameters or ()):
            if params["batch"]:
                raise ParamError(
                    f"image={self.name}: image.batch=true is not supported:"
                    f" {self.no_batch_reason}; drop image.batch"
                )
            params = {k: v for k, v in params.items() if k != "batch"}
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
        self._store_root: Path | None = None

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

    def bind_store(self, root: Any) -> None:
        """The store's root: the batch ledger lives under ``<root>/batches/image-<name>/``."""
        self._store_root = Path(root)

    def load(self) -> None:
        if self._client is None:
            self._client = self.make_client(self._api_key())

    @property
    def client(self) -> Any:
        """The SDK client, made on first use."""
        self.load()
        return self._client

    @property
    def batch_size(self) -> int:
        """In batch mode every pending call of the stage, so that they go in one provider batch
        (``batch_size`` still overrides it), else the usual."""
        if self.params.get("batch") and not self.params.get("batch_size"):
            return BATCH_MODE_BATCH_SIZE
        return super().batch_size

    def unload(self) -> None:
        client, self._client = self._client, None
        close = getattr(client, "close", None)
        if callable(close):
            close()

    # -- calls ----------------------------------------------------------------------------------
    def run_batch(self, items: list[dict[str, Any]]) -> list[Any]:
        self.load()
        if self.params.get("batch"):
            drawer = self.batch_drawer()
            drawn = drawer.draw([self.page_request(item) for item in items])
            drawer.settle([d] for d in drawn)
            return [d.result for d in drawn]
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
            assert reply is not None
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

    def usage(
        self, reply: ImageReply, attempts: int, waited_s: float, batch_id: str | None = None
    ) -> dict[str, Any]:
        """One call's usage: attempts, waits, tokens where reported, the image and its cost
        (``batch_id``: answered in that provider batch, at :data:`BATCH_DISCOUNT` of the price)."""
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
            usage["cost_usd"] = cost if batch_id is None else round(cost * BATCH_DISCOUNT, 10)
            usage["priced_calls"] = 1
        if batch_id is not None:
            usage.update(batch=True, batch_id=str(batch_id), batch_calls=1)
        return usage

    # -- the dry run ----------------------------------------------------------------------------
    def pricing(self) -> ImagePricing:
        """The model's price from ``prices`` (else none, with what to set)."""
        price = self._prices.get(self.model)
        if price is not None:
            return ImagePricing(price, f"image={self.name}: image.prices")
        return ImagePricing(None, f"no price for model {self.model}: set image.prices")

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
                batch = bool(self.params.get("batch"))
                estimate["cost_usd"] = cost * BATCH_DISCOUNT if batch else cost
                if batch:
                    estimate["batch"] = True
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

    # -- provider batches (batch_provider set) ------------------------------------------------
    def batch_drawer(self) -> BatchDrawer:
        return BatchDrawer(self, self._store_root)

    def batch_server(self) -> str:
        """The server the batches go to, as the ledger records it (without credentials)."""
        return public_url(getattr(self._client, "base_url", None) or self.params["base_url"])

    def batch_route(self, request: DrawRequest) -> str:
        """The endpoint ``request``'s batch goes to (one per batch); one route: ``""``."""
        return ""

    def batch_api(self, route: str) -> BatchAPI:
        """The provider's batch protocol for requests of ``route``."""
        raise NotImplementedError

    def batch_body(self, request: DrawRequest) -> dict[str, Any]:
        """``request`` as its batch line carries it (JSON): the synchronous request's content."""
        raise NotImplementedError

    def batch_reply(self, response: Any) -> ImageReply:
        """A batch answer (the SDK's reply object) as :class:`ImageReply`."""
        raise NotImplementedError

    def batch_result(self, response: Any, batch_id: str | None) -> ImageOutput | Failure | None:
        """A request's answer in batch ``batch_id`` as its output or failure; None: send it the
        synchronous way (an unreadable answer, or one without an image while ``empty_retries``
        asks again)."""
        where = f"image={self.name} ({self.model})"
        if isinstance(response, RequestError):
            message = f"{where}: {response.message} (batch {batch_id})"
            return Failure(response.category, self.scrub(message))
        try:
            reply = self.batch_reply(response)
        except (AttributeError, TypeError, ValueError):
            return None
        if reply.data:
            try:
                image = decode_image(reply.data)
            except ValueError as exc:
                reply = ImageReply(None, reply.input_tokens, reply.output_tokens, str(exc))
            else:
                return ImageOutput(image, self.usage(reply, 1, 0.0, batch_id=batch_id))
        if not reply.declined and int(self.params["empty_retries"]) > 0:
            return None
        category = "refused" if reply.declined else "empty_output"
        what = reply.message or "the answer holds no image"
        return Failure(category, self.scrub(f"{where}: {what} (batch {batch_id})"))


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
