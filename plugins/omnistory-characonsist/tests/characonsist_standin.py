"""A stand-in for a Murray-Wang/CharaConsist checkout, and a tiny FLUX.1-dev checkpoint for it.

:func:`build_source_tree` writes the two modules the plugin imports, at their upstream paths:
``models/pipeline_characonsist.py`` (``CharaConsistPipeline``, a subclass of diffusers'
``FluxPipeline`` taking CharaConsist's extra keywords and returning ``(images, spatial_kwargs)``)
and ``models/attention_processor_characonsist.py`` (``reset_attn_processor``, ``set_text_len``,
``reset_size``, ``reset_id_bank``).  The stand-in draws with the real ``FluxPipeline`` (tiny
random weights, :func:`build_checkpoint`), derives a foreground mask from each image, and
records every call (flags, text lengths, whether an ID state was given) in ``pipe.calls``.
CharaConsist's point-tracking attention is not exercised.
"""

from __future__ import annotations

from pathlib import Path

ATTENTION_SOURCE = '''\
"""Test stand-in for CharaConsist's attention helpers: the state they set lives on the pipe."""


def reset_attn_processor(pipe, size, fg_share_freq=2, bg_share_freq=1):
    pipe.characonsist = {"size": tuple(size), "text_len": None, "id_bank": {}}
    if not hasattr(pipe, "calls"):
        pipe.calls = []


def set_text_len(pipe, bg_len, real_len):
    pipe.characonsist["text_len"] = (bg_len, real_len)


def reset_size(pipe, h, w):
    pipe.characonsist["hw"] = (h, w)


def reset_id_bank(pipe):
    pipe.characonsist["id_bank"] = {}
    pipe.calls.append({"reset_id_bank": True})


def get_curr_fg_mask(pipe, image):
    import numpy as np
    import torch

    h, w = pipe.characonsist["size"]
    small = np.asarray(image.convert("L").resize((w, h)), dtype=np.float32)
    return torch.from_numpy(small > small.mean())[None]
'''

PIPELINE_SOURCE = '''\
"""Test stand-in for CharaConsist's pipeline (a FluxPipeline subclass)."""

import torch
from diffusers import FluxPipeline

from .attention_processor_characonsist import get_curr_fg_mask


class CharaConsistPipeline(FluxPipeline):
    @torch.no_grad()
    def __call__(self, prompt=None, height=None, width=None, num_inference_steps=50,
                 guidance_scale=3.5, generator=None, max_sequence_length=512,
                 spatial_kwargs=dict(), is_id=False, is_pre_run=False, use_interpolate=True,
                 share_bg=True, **kwargs):
        state = self.characonsist
        self.calls.append(dict(prompt=prompt, is_id=is_id, is_pre_run=is_pre_run,
                               text_len=state["text_len"], size=state["size"],
                               had_id_state="id_fg_mask" in spatial_kwargs,
                               use_interpolate=use_interpolate, share_bg=share_bg,
                               steps=num_inference_steps, guidance=guidance_scale,
                               height=height, width=width))
        if not is_id and "id_fg_mask" not in spatial_kwargs:
            raise ValueError("no ID state: draw the ID shot first")
        out = FluxPipeline.__call__(self, prompt=prompt, height=height, width=width,
                                    num_inference_steps=num_inference_steps,
                                    guidance_scale=guidance_scale, generator=generator,
                                    max_sequence_length=max_sequence_length, output_type="pil")
        mask = get_curr_fg_mask(self, out.images[0])
        if is_id:
            state["id_bank"]["mask"] = mask
        return out.images, {**spatial_kwargs, "curr_fg_mask": mask}
'''


def build_source_tree(root: Path) -> Path:
    """The stand-in checkout (no torch needed)."""
    files = {
        "models/__init__.py": "",
        "models/pipeline_characonsist.py": PIPELINE_SOURCE,
        "models/attention_processor_characonsist.py": ATTENTION_SOURCE,
    }
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def build_checkpoint(path: Path, seed: int = 0) -> Path:
    """A tiny random FLUX.1-dev checkpoint: omnistory-flux's builder, with a narrower VAE (the
    preset draws at 1344x768, where the VAE is most of the cost)."""
    from diffusers import AutoencoderKL
    from omnistory_flux.random_pipeline import CONFIGS, random_flux_pipeline

    pipe = random_flux_pipeline("dev", "tiny", seed=seed)
    narrow = {**CONFIGS["tiny"]["vae"], "block_out_channels": (4,) * 4, "norm_num_groups": 2}
    pipe.vae = AutoencoderKL(**narrow)
    pipe.save_pretrained(path)
    return path
