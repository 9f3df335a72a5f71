"""Prices of hosted image models in their provider's unit (per image, per million input and
output tokens), as ``image.prices`` declares them: ``{model: {per_image, input_per_mtok,
output_per_mtok}}``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: what an image price may name (USD): per output image, per million input / output tokens
IMAGE_PRICE_FIELDS = ("per_image", "input_per_mtok", "output_per_mtok")


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


@dataclass(frozen=True)
class ImagePricing:
    """A hosted image model's price (None: unknown) and where it comes from (or what to set)."""

    price: ImagePrice | None
    source: str


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


__all__ = ["IMAGE_PRICE_FIELDS", "ImagePrice", "ImagePricing", "parse_image_prices"]
