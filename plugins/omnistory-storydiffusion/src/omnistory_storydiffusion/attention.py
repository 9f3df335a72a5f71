"""Consistent self-attention (StoryDiffusion), re-implemented from the method's description.

In the self-attention layers of the UNet's up blocks, a shot attends not only to its own tokens
but also to tokens remembered from its characters' *ID shots* at the same denoising step:

* while an ID shot is drawn (*write*), every such layer stores, at every step, a random sample of
  its input tokens (each token kept with probability ``rate``: ``rate_32`` in the layers at 1/32 of
  the image size, ``rate_64`` elsewhere) for both halves of the guidance batch, under the shot's
  character;
* while any other shot is drawn (*read*), the layer's keys and values are computed from the
  stored tokens of every character present (same layer, same step) followed by the shot's own
  tokens.
* No sharing at step 0; from step 1 on each layer call shares with probability 0.7 before step 20
  and 0.9 after, otherwise it attends to its own tokens alone (the method's random gating).

All state lives in one :class:`StoryBank` per story: a new story starts from an empty bank, so
nothing of one story reaches another.  The random draws (token samples, gates) come from the
bank's own generator, reseeded with the shot's seed before each shot, so a shot's draws do not
depend on what ran before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: a layer call shares when its uniform draw exceeds SKIP_EARLY before step LATE_STEP, SKIP_LATE
#: from it on (probabilities 0.7 and 0.9)
LATE_STEP = 20
SKIP_EARLY = 0.3
SKIP_LATE = 0.1


@dataclass
class StoryBank:
    """The consistent-attention state of one story."""

    rate_32: float = 0.5
    rate_64: float = 0.5
    #: ``off`` (plain attention), ``write`` (an ID shot) or ``read`` (any other shot)
    mode: str = "off"
    #: the character an ID shot writes for
    writer: str | None = None
    #: the characters whose tokens a shot reads
    readers: tuple[str, ...] = ()
    step: int = 0
    height: int = 1024
    width: int = 1024
    #: character -> (layer, step) -> stored tokens, shape (guidance halves, n, channels)
    tokens: dict[str, dict[tuple[str, int], Any]] = field(default_factory=dict)
    generator: Any = None
    #: (step, token count) -> the sample drawn for that resolution at that step
    _samples: dict[tuple[int, int], Any] = field(default_factory=dict)

    def start_shot(self, mode: str, seed: int, writer: str | None = None, readers=()) -> None:
        """Before a shot: its role, step 0, the random draws reseeded."""
        import torch

        self.mode, self.writer, self.readers, self.step = mode, writer, tuple(readers), 0
        self._samples = {}
        self.generator = torch.Generator("cpu").manual_seed(int(seed))
        if mode == "write" and writer is not None:
            self.tokens[writer] = {}

    def next_step(self) -> None:
        self.step += 1

    def rate(self, n_tokens: int) -> float:
        at_32 = (self.height // 32) * (self.width // 32)
        return self.rate_32 if n_tokens == at_32 else self.rate_64

    def sample(self, n_tokens: int) -> Any:
        """The token indices kept at this step for layers with ``n_tokens`` tokens."""
        import torch

        key = (self.step, n_tokens)
        if key not in self._samples:
            draw = torch.rand(n_tokens, generator=self.generator)
            self._samples[key] = torch.nonzero(draw < self.rate(n_tokens)).flatten()
        return self._samples[key]

    def share_now(self) -> bool:
        """The random gate of one layer call."""
        import torch

        if self.step < 1:
            return False
        skip = SKIP_EARLY if self.step < LATE_STEP else SKIP_LATE
        return bool(torch.rand(1, generator=self.generator).item() > skip)


class ConsistentSelfAttention:
    """An attention processor for one up-block self-attention layer (diffusers' processor call
    convention), reading and writing ``bank``."""

    def __init__(self, bank: StoryBank, layer: str) -> None:
        self.bank = bank
        self.layer = layer

    def __call__(
        self,
        attn: Any,
        hidden_states: Any,
        encoder_hidden_states: Any = None,
        attention_mask: Any = None,
        temb: Any = None,
        **kwargs: Any,
    ) -> Any:
        bank = self.bank
        tokens = hidden_states
        if hidden_states.ndim == 4:  # (batch, channels, h, w) -> (batch, h*w, channels)
            batch, channels, h, w = hidden_states.shape
            tokens = hidden_states.view(batch, channels, h * w).transpose(1, 2)
        context = None
        if bank.mode == "write" and bank.writer is not None:
            kept = bank.sample(tokens.shape[1])
            bank.tokens[bank.writer][(self.layer, bank.step)] = tokens[:, kept].detach().clone()
        elif bank.mode == "read" and bank.readers and bank.share_now():
            stored = [bank.tokens[name].get((self.layer, bank.step)) for name in bank.readers]
            stored = [t for t in stored if t is not None]
            if stored:
                import torch

                context = torch.cat([*stored, tokens], dim=1)
        return attend(attn, hidden_states, context, temb)


def attend(attn: Any, hidden_states: Any, context: Any, temb: Any) -> Any:
    """Self-attention of ``attn`` with keys and values from ``context`` (own tokens when None),
    diffusers' ``AttnProcessor2_0`` otherwise."""
    import torch.nn.functional as F

    residual = hidden_states
    if attn.spatial_norm is not None:
        hidden_states = attn.spatial_norm(hidden_states, temb)
    four_d = hidden_states.ndim == 4
    if four_d:
        batch, channels, h, w = hidden_states.shape
        hidden_states = hidden_states.view(batch, channels, h * w).transpose(1, 2)
    if attn.group_norm is not None:
        hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)
    if context is None:
        context = hidden_states
    batch = hidden_states.shape[0]
    query = attn.to_q(hidden_states)
    key = attn.to_k(context)
    value = attn.to_v(context)
    head_dim = key.shape[-1] // attn.heads
    query = query.view(batch, -1, attn.heads, head_dim).transpose(1, 2)
    key = key.view(batch, -1, attn.heads, head_dim).transpose(1, 2)
    value = value.view(batch, -1, attn.heads, head_dim).transpose(1, 2)
    out = F.scaled_dot_product_attention(query, key, value, dropout_p=0.0, is_causal=False)
    out = out.transpose(1, 2).reshape(batch, -1, attn.heads * head_dim).to(query.dtype)
    out = attn.to_out[1](attn.to_out[0](out))
    if four_d:
        out = out.transpose(-1, -2).reshape(batch, channels, h, w)
    if attn.residual_connection:
        out = out + residual
    return out / attn.rescale_output_factor


def install(unet: Any, bank: StoryBank) -> list[str]:
    """Put :class:`ConsistentSelfAttention` on every up-block self-attention layer (``attn1``) of
    ``unet`` and diffusers' default processor everywhere else; the consistent layers' names."""
    from diffusers.models.attention_processor import AttnProcessor2_0

    processors: dict[str, Any] = {}
    consistent: list[str] = []
    for name in unet.attn_processors:
        if name.startswith("up_blocks") and name.endswith("attn1.processor"):
            processors[name] = ConsistentSelfAttention(bank, name)
            consistent.append(name)
        else:
            processors[name] = AttnProcessor2_0()
    unet.set_attn_processor(processors)
    return consistent


__all__ = ["ConsistentSelfAttention", "StoryBank", "attend", "install"]
