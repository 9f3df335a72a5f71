"""The CSD style network: a CLIP vision transformer whose projection is CSD's style head.

Imports torch at module level: only :mod:`.csd` imports it, inside ``load()``.

The parameter names are those of the checkpoint the official evaluator loads
(``csd_vit-large.pth``: ``backbone.*`` for the ViT, ``last_layer_style`` and
``last_layer_content`` for the two heads; the ViT's own ``proj`` is absent), so that file loads
into this module.  The architecture is CLIP's ViT (pre-norm residual attention blocks with
QuickGELU MLPs, a class token, ``ln_post`` on the class token); the width, depth, heads, patch
and image size are parameters so that a test can build a tiny one.  The defaults are ViT-L/14
at 224 px with a 768-d head, the official model.
"""

from __future__ import annotations

import torch
from torch import nn


class _QuickGELU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class _MLP(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.c_fc = nn.Linear(width, 4 * width)
        self.gelu = _QuickGELU()
        self.c_proj = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class _Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = _MLP(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class _Transformer(nn.Module):
    def __init__(self, width: int, layers: int, heads: int):
        super().__init__()
        self.resblocks = nn.Sequential(*[_Block(width, heads) for _ in range(layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.resblocks(x)


class _Backbone(nn.Module):
    """CLIP's ViT up to the normalised class token (no projection)."""

    def __init__(self, image_size: int, patch_size: int, width: int, layers: int, heads: int):
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"image_size {image_size} is not a multiple of patch {patch_size}")
        scale = width**-0.5
        grid = image_size // patch_size
        self.conv1 = nn.Conv2d(3, width, kernel_size=patch_size, stride=patch_size, bias=False)
        self.class_embedding = nn.Parameter(scale * torch.randn(width))
        self.positional_embedding = nn.Parameter(scale * torch.randn(grid * grid + 1, width))
        self.ln_pre = nn.LayerNorm(width)
        self.transformer = _Transformer(width, layers, heads)
        self.ln_post = nn.LayerNorm(width)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        x = self.conv1(pixels).flatten(2).transpose(1, 2)  # N, grid*grid, width
        cls = self.class_embedding.to(x.dtype).expand(x.shape[0], 1, -1)
        x = torch.cat([cls, x], dim=1) + self.positional_embedding.to(x.dtype)
        x = self.transformer(self.ln_pre(x))
        return self.ln_post(x[:, 0, :])


class CSDStyleNet(nn.Module):
    """Pixels (N, 3, S, S), CLIP-normalised -> L2-normalised style embeddings (N, embed_dim)."""

    def __init__(
        self,
        image_size: int = 224,
        patch_size: int = 14,
        width: int = 1024,
        layers: int = 24,
        heads: int | None = None,
        embed_dim: int = 768,
    ):
        super().__init__()
        heads = heads or max(1, width // 64)  # CLIP's ViTs use 64-d heads
        self.image_size = image_size
        self.backbone = _Backbone(image_size, patch_size, width, layers, heads)
        scale = width**-0.5
        self.last_layer_style = nn.Parameter(scale * torch.randn(width, embed_dim))
        # loaded with the checkpoint but unused: the content head is not part of the metric
        self.last_layer_content = nn.Parameter(scale * torch.randn(width, embed_dim))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        feature = self.backbone(pixels)
        return nn.functional.normalize(feature @ self.last_layer_style, dim=-1, p=2)


__all__ = ["CSDStyleNet"]
