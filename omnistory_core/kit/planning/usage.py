"""Token usage and cost of one planner call, from a configurable price table.

The price table maps a model name to USD per million input and output tokens::

    prices:
      gpt-5.4: {input_per_mtok: 2.5, output_per_mtok: 10.0}

No prices ship for real runs (they change, and differ per account and tier): a model missing
from the table, or with a ``null`` price, gets no ``cost_usd`` at all, never a cost of 0, so a
summed cost is never silently too low.  The dry run's estimates fall back on
:data:`REFERENCE_PRICES` (each with its source) for models the planner's table does not price.
``priced_calls`` counts the calls that carry a cost, so
the manifest's summed usage shows how much of the spend is covered.

A call answered through a provider batch (``batch=true``, :mod:`omnistory_core.kit.batches`) costs
:data:`~omnistory_core.kit.batches.BATCH_DISCOUNT` (half) of the table's price: its usage says
``batch: true``, its ``batch_id`` and ``batch_calls: 1`` (summed in the manifest), and its
``cost_usd`` is the halved one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from omnistory_core.kit.batches import BATCH_DISCOUNT

PRICE_FIELDS = ("input_per_mtok", "output_per_mtok")


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


def parse_price_table(
    raw: Mapping[str, Any] | None, where: str = "planner.prices"
) -> dict[str, Price]:
    """Validate a price table; entries with a ``null`` price are left out (unknown price).

    Raises ``ValueError`` naming the entry and field for anything else that is not a
    non-negative number.
    """
    table: dict[str, Price] = {}
    if raw is None:
        return table
    if not isinstance(raw, Mapping):
        raise ValueError(
            f"{where}: expected a mapping of model -> prices, got {type(raw).__name__}"
        )
    for model, entry in raw.items():
        if entry is None:
            continue
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where}.{model}: expected a mapping with {', '.join(PRICE_FIELDS)}")
        unknown = sorted(set(entry) - set(PRICE_FIELDS))
        if unknown:
            raise ValueError(
                f"{where}.{model}: unknown field(s) {', '.join(map(str, unknown))}; "
                f"expected {', '.join(PRICE_FIELDS)}"
            )
        values: dict[str, float] = {}
        for name in PRICE_FIELDS:
            value = entry.get(name)
            if value is None:
                break
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{where}.{model}.{name}: expected a number >= 0, got {value!r}")
            values[name] = float(value)
        else:
            table[str(model)] = Price(**values)
    return table


#: Reference prices (USD per million tokens, standard tier, short context) that only the dry run
#: (``engine.dry_run=true``) falls back on when the planner's own ``prices`` does not price its
#: model; a run's recorded ``cost_usd`` never uses them.  Each entry names its source and the date
#: it was read; they change, so check the provider's page before budgeting.
REFERENCE_PRICES: dict[str, dict[str, Any]] = {
    "gpt-5.4": {
        "input_per_mtok": 2.5,
        "output_per_mtok": 15.0,
        "source": "OpenAI API pricing page (developers.openai.com/api/docs/pricing), standard"
        " tier under 272K input tokens, as quoted by benchlm.ai (2026-04-13) and tokenmix.ai"
        " (2026-06-04); not read from OpenAI's page on this machine",
    },
    "claude-opus-4-7": {
        "input_per_mtok": 5.0,
        "output_per_mtok": 25.0,
        "source": "Anthropic pricing docs (docs.anthropic.com/en/docs/about-claude/pricing), base"
        " input and output, as quoted by aiunpacker.com (May 2026) and apidog.com; not read from"
        " Anthropic's page on this machine",
    },
}


def reference_price(model: str) -> tuple[Price, str] | None:
    """The dry run's fallback price of ``model`` and its source, or None when there is none."""
    entry = REFERENCE_PRICES.get(model)
    if entry is None:
        return None
    return Price(float(entry["input_per_mtok"]), float(entry["output_per_mtok"])), str(
        entry["source"]
    )


def usage_record(
    model: str,
    input_tokens: int | None,
    output_tokens: int | None,
    prices: Mapping[str, Price],
    *,
    attempts: int = 1,
    waited_s: float = 0.0,
    extra: Mapping[str, int | float] | None = None,
    batch_id: str | None = None,
) -> dict[str, Any]:
    """The ``PlannerResponse.usage`` of one call (numbers, which the manifest sums; and for a
    batch call ``batch: true`` and the ``batch_id``, which it leaves out).

    Token counts the API did not report are left out; ``cost_usd`` is present only when both
    counts and the model's price are known.  ``batch_id``: the call was answered in that provider
    batch, at :data:`~omnistory_core.kit.batches.BATCH_DISCOUNT` of the price.
    """
    usage: dict[str, Any] = {
        "calls": 1,
        "attempts": int(attempts),
        "retry_wait_s": round(float(waited_s), 6),
    }
    if input_tokens is not None:
        usage["input_tokens"] = int(input_tokens)
    if output_tokens is not None:
        usage["output_tokens"] = int(output_tokens)
    for key, value in (extra or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            usage[key] = value
    price = prices.get(model)
    share = 1.0 if batch_id is None else BATCH_DISCOUNT
    if price is None or input_tokens is None or output_tokens is None:
        usage["priced_calls"] = 0
    else:
        usage["cost_usd"] = round(share * price.cost(int(input_tokens), int(output_tokens)), 10)
        usage["priced_calls"] = 1
    if batch_id is not None:
        usage.update(batch=True, batch_id=str(batch_id), batch_calls=1)
    return usage


# -- the dry run's estimates ------------------------------------------------------------
@dataclass
class Pricing:
    """A model's price (None: unknown) and where it comes from (or what to set)."""

    price: Price | None
    source: str


def price_of(model: str, prices: Any, where: str) -> Pricing:
    """A model's price: from the component's own ``prices`` table (``where`` names it), else
    the reference table, else none (with what to set)."""
    table = parse_price_table(prices, where=where)
    if model in table:
        return Pricing(table[model], where)
    reference = reference_price(model)
    if reference is not None:
        return Pricing(*reference)
    return Pricing(None, f"no price for model {model}: set {where}")


def count_tokens(text: str) -> int:
    """Tokens of ``text``: tiktoken's ``o200k_base`` when tiktoken is installed, else the
    characters divided by 4 (rounded up), the usual rule of thumb for English."""
    try:
        import tiktoken  # pyright: ignore[reportMissingImports] - optional
    except ImportError:
        return math.ceil(len(text) / 4)
    return len(tiktoken.get_encoding("o200k_base").encode(text))


def image_tokens(data: bytes) -> int:
    """Tokens of one image as Anthropic documents its estimate (width x height / 750); an
    assumption for other providers, whose formulas differ."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        width, height = img.size
    return math.ceil(width * height / 750)


__all__ = [
    "Pricing",
    "count_tokens",
    "image_tokens",
    "price_of",
    "PRICE_FIELDS",
    "REFERENCE_PRICES",
    "Price",
    "parse_price_table",
    "reference_price",
    "usage_record",
]
