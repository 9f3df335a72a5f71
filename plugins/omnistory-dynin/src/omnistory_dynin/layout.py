"""The joint TI2TIS token sequence of Dynin-Omni and how its generated spans are read back.

Pure functions over token ids (no torch), so the layout is testable on its own.  One sequence holds,
in this order (facts of the benchmark's Dynin-Omni runner, any-to-any/Dynin-omni):

    <task TI2TIS> <soi> source image codes <eoi>
    [pad] * (prompt_length - len(prompt))  <bos> prompt <eos>        (left padded, pads unattended)
    <soi> [mask] * n_image <eoi>                                      target image
    <bos> [mask] * (text_length - 1)                                  target text
    <soa> [mask] * (speech_length - 1)                                target speech codes
    "emotion: " [mask] "\\n" "speed: " [mask] "\\n" "pitch: " [mask] "\\n" "gender: " [mask] "\\n"

Image codes live at ``text_vocab + code`` and speech codes at ``text_vocab + image_codebook +
code``, where ``text_vocab`` is the tokenizer's length.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

#: the speech-metadata fields of the sequence tail, in sequence order
TAIL_FIELDS: tuple[str, ...] = ("emotion", "speed", "pitch", "gender")
#: the spans the sampler fills, in the order it visits them at every step
SPAN_ORDER: tuple[str, ...] = ("image", "text", "speech", *TAIL_FIELDS)


@dataclass(frozen=True)
class TokenLayout:
    """Reserved ids and sizes of one checkpoint's vocabulary.

    The defaults are those of ``snu-aidas/Dynin-Omni_nips`` as the benchmark's runner uses them:
    the TI2TIS task id has no token string in the tokenizer (126107 is a reserved slot), the
    tokenizer has 126372 entries, the loaded config reports ``model_type`` ``omada``, and the whole
    sequence must fit 4096 positions.
    """

    task_id: int = 126107
    soi_id: int = 126084
    eoi_id: int = 126085
    soa_id: int = 126097
    eoa_id: int = 126098
    image_codebook_size: int = 8192
    speech_codebook_size: int = 4096
    #: expected ``len(tokenizer)``; None skips the check
    tokenizer_length: int | None = 126372
    #: expected ``model.config.model_type``; None skips the check
    model_type: str | None = "omada"
    max_sequence_length: int = 4096

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


OFFICIAL_LAYOUT = TokenLayout()
_INT_FIELDS = ("task_id", "soi_id", "eoi_id", "soa_id", "eoa_id")
_SIZE_FIELDS = ("image_codebook_size", "speech_codebook_size", "max_sequence_length")


def parse_layout(value: Mapping[str, Any] | None) -> TokenLayout:
    """The official layout with the given fields replaced; ``ValueError`` names a bad field."""
    if value is None:
        return OFFICIAL_LAYOUT
    if not isinstance(value, Mapping):
        raise ValueError(f"must be null or a mapping of {', '.join(_fields())}, got {value!r}")
    unknown = sorted(set(value) - set(_fields()))
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}; valid: {', '.join(_fields())}")
    merged = {**OFFICIAL_LAYOUT.to_dict(), **dict(value)}
    for key in _INT_FIELDS:
        if not _is_int(merged[key], 0):
            raise ValueError(f"{key} must be an integer >= 0, got {merged[key]!r}")
    for key in _SIZE_FIELDS:
        if not _is_int(merged[key], 1):
            raise ValueError(f"{key} must be an integer >= 1, got {merged[key]!r}")
    if merged["tokenizer_length"] is not None and not _is_int(merged["tokenizer_length"], 1):
        raise ValueError(
            f"tokenizer_length must be null or an integer >= 1, got {merged['tokenizer_length']!r}"
        )
    if merged["model_type"] is not None and not (
        isinstance(merged["model_type"], str) and merged["model_type"].strip()
    ):
        raise ValueError(f"model_type must be null or a string, got {merged['model_type']!r}")
    return TokenLayout(**merged)


def _fields() -> tuple[str, ...]:
    return tuple(OFFICIAL_LAYOUT.to_dict())


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclass
class JointSequence:
    """A built sequence: ids, the target spans ``[start, end)``, and the unattended padding."""

    ids: list[int]
    spans: dict[str, tuple[int, int]]
    pad_start: int
    pad_count: int
    prompt_tokens: int
    source_codes: int

    def attention(self) -> list[bool]:
        """Per position: attended (True) or left padding (False)."""
        mask = [True] * len(self.ids)
        for i in range(self.pad_start, self.pad_start + self.pad_count):
            mask[i] = False
        return mask


class LayoutError(ValueError):
    """The example does not fit the sequence (prompt too long, wrong number of codes ...)."""


def build_sequence(
    *,
    source_codes: Iterable[int],
    prompt_ids: list[int],
    bos_id: int,
    eos_id: int,
    pad_id: int,
    mask_id: int,
    encode: Callable[[str], list[int]],
    layout: TokenLayout,
    text_vocab: int,
    prompt_length: int,
    text_length: int,
    speech_length: int,
    expected_source_codes: int | None = None,
) -> JointSequence:
    """The joint sequence of one example.

    ``source_codes`` are MAGVIT-v2 code indices of the current page (0-based, not yet offset);
    ``prompt_ids`` the tokenized prompt without special tokens; ``encode`` tokenizes the tail's
    field labels (without special tokens).  Raises :class:`LayoutError` when the example cannot
    fit, as the official runner does.
    """
    codes = [int(c) + text_vocab for c in source_codes]
    if expected_source_codes is not None and len(codes) != expected_source_codes:
        raise LayoutError(
            f"expected {expected_source_codes} source image codes, found {len(codes)}"
        )
    prompt = [bos_id, *prompt_ids, eos_id]
    if len(prompt) > prompt_length:
        raise LayoutError(f"prompt exceeds {prompt_length} tokens: {len(prompt)}")
    padding = prompt_length - len(prompt)
    ids = [layout.task_id, layout.soi_id, *codes, layout.eoi_id]
    pad_start = len(ids)
    ids += [pad_id] * padding + prompt + [layout.soi_id]
    spans: dict[str, tuple[int, int]] = {}
    start = len(ids)
    ids += [mask_id] * len(codes)
    spans["image"] = (start, len(ids))
    ids += [layout.eoi_id, bos_id]
    start = len(ids)
    ids += [mask_id] * (text_length - 1)
    spans["text"] = (start, len(ids))
    ids.append(layout.soa_id)
    start = len(ids)
    ids += [mask_id] * (speech_length - 1)
    spans["speech"] = (start, len(ids))
    newline = encode("\n")
    for name in TAIL_FIELDS:
        ids += encode(f"{name}: ")
        spans[name] = (len(ids), len(ids) + 1)
        ids.append(mask_id)
        ids += newline
    if len(ids) > layout.max_sequence_length:
        raise LayoutError(
            f"sequence exceeds the model context: {len(ids)} > {layout.max_sequence_length}"
        )
    return JointSequence(
        ids=ids,
        spans=spans,
        pad_start=pad_start,
        pad_count=padding,
        prompt_tokens=len(prompt),
        source_codes=len(codes),
    )


def text_until_eos(ids: Iterable[int], eos_id: int) -> list[int]:
    """The generated text ids up to (not including) the first end-of-sequence token."""
    ids = list(ids)
    return ids[: ids.index(eos_id)] if eos_id in ids else ids


def image_codes(ids: Iterable[int], text_vocab: int) -> list[int]:
    """Image code indices of the generated image span (ids minus the text vocabulary)."""
    return [int(i) - text_vocab for i in ids]


def speech_codes(ids: Iterable[int], *, base: int, size: int, stop_ids: Iterable[int]) -> list[int]:
    """Speech code indices up to the first stop id (end of audio / of text); ids outside the
    speech code range are skipped."""
    stops = set(stop_ids)
    codes: list[int] = []
    for token in ids:
        if token in stops:
            break
        if base <= token < base + size:
            codes.append(int(token) - base)
    return codes


def speech_units(codes: Iterable[int]) -> str:
    """The unit string the EMOVA speech decoder reads: ``<|speech_12|><|speech_7|>...``."""
    return "".join(f"<|speech_{int(c)}|>" for c in codes)


def tail_values(
    ids: list[int], spans: Mapping[str, tuple[int, int]], decode: Callable[[list[int]], str]
) -> dict[str, str]:
    """The generated speech-metadata tail (emotion, speed, pitch, gender) as decoded strings."""
    return {name: decode(ids[slice(*spans[name])]).strip() for name in TAIL_FIELDS}
