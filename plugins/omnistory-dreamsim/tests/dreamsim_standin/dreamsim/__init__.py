"""Stand-in for the ``dreamsim`` package's public API (tests only).

``dreamsim(pretrained, device, cache_dir, normalize_embeds, dreamsim_type)`` returns a model whose
``embed`` is a fixed random projection of the pixels (seeded: the same in every run), normalized
like DreamSim's ensemble features, and a preprocess function with the real one's output shape
(``1 x 3 x H x W`` in [0, 1]).  ``CALLS`` records every load.
"""

import numpy as np
import torch

CALLS = []


class _Model:
    def embed(self, batch):
        gen = torch.Generator().manual_seed(0)
        proj = torch.randn(batch[0].numel(), 16, generator=gen)
        emb = batch.reshape(batch.shape[0], -1) @ proj
        emb = emb - emb.mean(dim=1, keepdim=True)
        return emb / emb.norm(dim=1, keepdim=True)


def dreamsim(
    pretrained=True,
    device="cuda",
    cache_dir="./models",
    normalize_embeds=True,
    dreamsim_type="ensemble",
    use_patch_model=False,
):
    CALLS.append(
        dict(
            pretrained=pretrained,
            device=device,
            cache_dir=cache_dir,
            normalize_embeds=normalize_embeds,
            dreamsim_type=dreamsim_type,
        )
    )

    def preprocess(img):
        img = img.convert("RGB").resize((8, 8))
        pixels = np.asarray(img, dtype=np.float32) / 255
        return torch.from_numpy(pixels).permute(2, 0, 1).unsqueeze(0)

    return _Model(), preprocess
