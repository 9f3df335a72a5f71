"""SDXL prompt embeddings without the 77-token limit, with A1111 emphasis weights.

ViStoryBench runs StoryDiffusion's original mode with ``sd_embed``'s
``get_weighted_text_embeddings_sdxl`` so that its long shot lines are not cut at CLIP's 77 tokens
(its README, L161).  ``sd_embed`` is not on PyPI; this module does what that function is
documented to do, re-implemented here:

* the prompt is split into emphasis segments (``(text)`` x1.1, ``[text]`` /1.1, ``(text:w)``,
  backslash escapes; :func:`parse_emphasis`), each segment tokenized without its start/end tokens;
* the prompt and the negative prompt are padded with end tokens to the same length, then cut into
  chunks of 75 tokens, each framed by the start and end tokens, the last one padded with end tokens
  to 77 (an empty prompt is the word ``empty``);
* each chunk goes through both text encoders (penultimate hidden states, concatenated); a token
  whose weight is not 1 has its embedding multiplied by the weight; the chunks are concatenated
  along the sequence; the pooled embedding is the second encoder's for the last chunk.
"""

from __future__ import annotations

import re
from typing import Any

#: tokens per chunk between the start and end tokens (CLIP's 77 minus 2)
CHUNK = 75
EMPHASIS = 1.1
EMPTY_PROMPT = "empty"

_TOKEN = re.compile(r"\\[\\()\[\]]|\(|\)|\[|\]|:\s*([+-]?(?:\d+\.?\d*|\.\d+))\s*\)|[^\\()\[\]:]+|:")


def parse_emphasis(text: str) -> list[tuple[str, float]]:
    """``text`` as ``(segment, weight)`` pairs, neighbours of equal weight merged.

    ``(a)`` multiplies by 1.1, ``[a]`` divides by 1.1, ``(a:1.5)`` multiplies by 1.5 (nesting
    multiplies); ``\\(`` and friends are literal brackets; a bracket never closed applies to the
    rest of the text."""
    pieces: list[list[Any]] = []
    rounds: list[int] = []
    squares: list[int] = []

    def scale(start: int, factor: float) -> None:
        for piece in pieces[start:]:
            piece[1] *= factor

    for match in _TOKEN.finditer(text):
        token, weight = match.group(0), match.group(1)
        if token.startswith("\\"):
            pieces.append([token[1:], 1.0])
        elif token == "(":
            rounds.append(len(pieces))
        elif token == "[":
            squares.append(len(pieces))
        elif weight is not None and rounds:
            scale(rounds.pop(), float(weight))
        elif token == ")" and rounds:
            scale(rounds.pop(), EMPHASIS)
        elif token == "]" and squares:
            scale(squares.pop(), 1 / EMPHASIS)
        else:
            pieces.append([token, 1.0])
    for start in rounds:
        scale(start, EMPHASIS)
    for start in squares:
        scale(start, 1 / EMPHASIS)
    merged: list[tuple[str, float]] = []
    for segment, weight in pieces:
        if merged and merged[-1][1] == weight:
            merged[-1] = (merged[-1][0] + segment, weight)
        else:
            merged.append((segment, weight))
    return merged or [("", 1.0)]


def tokens_with_weights(tokenizer: Any, text: str) -> tuple[list[int], list[float]]:
    """Token ids (no start/end tokens, no truncation) and one weight per token."""
    ids: list[int] = []
    weights: list[float] = []
    for segment, weight in parse_emphasis(text or EMPTY_PROMPT):
        tokens = tokenizer(
            segment, truncation=False, add_special_tokens=False, verbose=False
        ).input_ids
        ids += tokens
        weights += [weight] * len(tokens)
    return ids, weights


def pad_to(ids: list[int], weights: list[float], length: int, pad: int) -> tuple[list, list]:
    extra = length - len(ids)
    return ids + [pad] * extra, weights + [1.0] * extra


def chunks(ids: list[int], weights: list[float], bos: int, eos: int) -> list[tuple[list, list]]:
    """77-token chunks: 75 tokens framed by ``bos``/``eos``, the last padded with ``eos``."""
    out = []
    for start in range(0, len(ids), CHUNK):
        body, body_weights = ids[start : start + CHUNK], weights[start : start + CHUNK]
        pad = CHUNK - len(body)
        out.append(([bos, *body, *([eos] * pad), eos], [1.0, *body_weights, *([1.0] * pad), 1.0]))
    return out


def encode_sdxl(pipe: Any, prompt: str, negative: str) -> tuple[Any, Any, Any, Any]:
    """``(prompt_embeds, negative_prompt_embeds, pooled, negative_pooled)`` for an SDXL pipeline,
    as described in the module docstring."""
    import torch

    sides = []
    for tokenizer in (pipe.tokenizer, pipe.tokenizer_2):
        pos = tokens_with_weights(tokenizer, prompt)
        neg = tokens_with_weights(tokenizer, negative)
        length = max(len(pos[0]), len(neg[0]))
        eos = pipe.tokenizer.eos_token_id
        pos, neg = pad_to(*pos, length, eos), pad_to(*neg, length, eos)
        bos = tokenizer.bos_token_id
        sides.append((chunks(*pos, bos, tokenizer.eos_token_id), chunks(*neg, bos, eos)))
    device = pipe.text_encoder.device

    def encode(first: list, second: list) -> tuple[Any, Any]:
        embeds, pooled = [], None
        for (ids_1, weights), (ids_2, _) in zip(first, second, strict=True):
            out_1 = pipe.text_encoder(
                torch.tensor([ids_1], device=device), output_hidden_states=True
            )
            out_2 = pipe.text_encoder_2(
                torch.tensor([ids_2], device=device), output_hidden_states=True
            )
            pooled = out_2[0]
            chunk = torch.cat([out_1.hidden_states[-2], out_2.hidden_states[-2]], dim=-1)[0]
            scale = torch.tensor(weights, dtype=chunk.dtype, device=chunk.device)
            embeds.append((chunk * scale[:, None])[None])
        return torch.cat(embeds, dim=1), pooled

    (pos_1, neg_1), (pos_2, neg_2) = sides
    with torch.no_grad():
        prompt_embeds, pooled = encode(pos_1, pos_2)
        negative_embeds, negative_pooled = encode(neg_1, neg_2)
    return prompt_embeds, negative_embeds, pooled, negative_pooled


__all__ = ["CHUNK", "chunks", "encode_sdxl", "parse_emphasis", "tokens_with_weights"]
