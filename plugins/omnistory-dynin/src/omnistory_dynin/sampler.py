"""The joint masked-diffusion sampler: every masked span of the sequence from ONE forward per step.

Facts of the benchmark's Dynin-Omni runner, implemented here in our own code:

* at each of ``steps`` steps the model sees the whole sequence once (no classifier-free guidance);
  pads are kept out of attention with a boolean ``attention_bias`` of shape (1, 1, L, L);
* per span, the still-masked positions are scored over the span's own vocabulary: image codes for
  the image, speech codes plus end-of-audio and end-of-text for the speech, the whole text
  vocabulary for the text and the four metadata slots of the tail;
* text and image tokens are drawn from that distribution, speech and tail tokens are its argmax;
  the token's probability is its confidence;
* per span, ``ceil(remaining / steps_left)`` positions with the highest confidence are committed,
  so every span is complete after the last step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omnistory_dynin.layout import SPAN_ORDER, TokenLayout

#: spans whose tokens are drawn at random; the others take the most likely token
SAMPLED_SPANS = frozenset({"text", "image"})


class SamplingError(RuntimeError):
    """The sampler could not fill every masked slot."""


def span_vocabularies(
    *, text_vocab: int, layout: TokenLayout, eos_id: int, device: Any
) -> dict[str, Any]:
    """Per span, the token ids it may take (1-D long tensors on ``device``)."""
    import torch

    image_base = text_vocab
    speech_base = text_vocab + layout.image_codebook_size
    text = torch.arange(text_vocab, device=device)
    image = torch.arange(image_base, image_base + layout.image_codebook_size, device=device)
    speech = torch.cat(
        (
            torch.arange(speech_base, speech_base + layout.speech_codebook_size, device=device),
            torch.tensor([layout.eoa_id, eos_id], device=device),
        )
    )
    return {name: {"image": image, "speech": speech}.get(name, text) for name in SPAN_ORDER}


def commit_count(remaining: int, steps: int, step: int) -> int:
    """How many of ``remaining`` masked positions a span commits at ``step`` (0-based)."""
    left = steps - step
    return (remaining + left - 1) // left


def sample_joint(
    model: Any,
    sequence: Any,
    spans: Mapping[str, tuple[int, int]],
    attention: Any,
    *,
    vocabularies: Mapping[str, Any],
    steps: int,
    mask_id: int,
    generator: Any,
) -> tuple[Any, int]:
    """Fill every masked span of ``sequence`` (shape (1, L), modified in place).

    Returns the sequence and the number of model forwards.  Raises :class:`SamplingError` when a
    masked slot is left (a sampled mask token, say), as the official runner does.
    """
    import torch

    device = sequence.device
    positions = torch.arange(sequence.shape[1], device=device)
    bias = (attention[:, :, None] & attention[:, None, :]).unsqueeze(1)
    forwards = 0
    with torch.inference_mode():
        for step in range(steps):
            masked = sequence.eq(mask_id)[0]
            if not bool(masked.any()):
                break
            logits = model(sequence, attention_bias=bias).logits[0]
            forwards += 1
            for name in SPAN_ORDER:
                if name not in spans:
                    continue
                start, end = spans[name]
                where = (masked & (positions >= start) & (positions < end)).nonzero(as_tuple=True)[
                    0
                ]
                if where.numel() == 0:
                    continue
                allowed = vocabularies[name]
                probs = logits[where][:, allowed].float().softmax(-1)
                if name in SAMPLED_SPANS:
                    picked = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
                    confidence = probs.gather(-1, picked[:, None]).squeeze(-1)
                else:
                    confidence, picked = probs.max(-1)
                chosen = confidence.topk(commit_count(where.numel(), steps, step)).indices
                sequence[0, where[chosen]] = allowed[picked[chosen]]
    if bool(sequence.eq(mask_id).any()):
        raise SamplingError("joint sampling left masked tokens")
    return sequence, forwards
