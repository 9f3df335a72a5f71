"""A stand-in for a UCSC-VLAA/story-adapter checkout, and tiny IP-Adapter weights for it.

:func:`build_source_tree` writes the package the plugin imports, ``ip_adapter`` (its
``__init__.py`` and ``ip_adapter.py``), with ``StoryAdapterXL(sd_pipe, image_encoder_path,
ip_ckpt, device)`` and its ``generate`` signature.  The stand-in wraps the prompt with the style
text, encodes the image prompt with a tiny CLIP vision model (``image_encoder_path``), projects
it with the ``image_proj`` weights of ``ip_ckpt`` into extra text tokens scaled by ``scale``, and
draws with the real SDXL pipeline it is given (tiny random weights); every call is recorded in
``adapter.calls``.  Story-Adapter's attention processors are not exercised.
"""

from __future__ import annotations

from pathlib import Path

INIT_SOURCE = """\
from .ip_adapter import StoryAdapterXL

__all__ = ["StoryAdapterXL"]
"""

ADAPTER_SOURCE = '''\
"""Test stand-in for story-adapter's ip_adapter/ip_adapter.py."""

import torch
from transformers import CLIPImageProcessor, CLIPVisionModelWithProjection


class StoryAdapterXL:
    def __init__(self, sd_pipe, image_encoder_path, ip_ckpt, device, num_tokens=4):
        self.pipe = sd_pipe.to(device)
        self.device = device
        self.num_tokens = num_tokens
        self.image_encoder = CLIPVisionModelWithProjection.from_pretrained(image_encoder_path)
        self.processor = CLIPImageProcessor.from_pretrained(image_encoder_path)
        state = torch.load(ip_ckpt, map_location="cpu")
        out_dim = self.pipe.unet.config.cross_attention_dim * num_tokens
        self.image_proj = torch.nn.Linear(self.image_encoder.config.projection_dim, out_dim)
        self.image_proj.load_state_dict(state["image_proj"])
        self.calls = []

    def generate(self, pil_image=None, prompt=None, negative_prompt=None, scale=1.0,
                 num_samples=4, seed=None, num_inference_steps=30, use_image=True,
                 style="comic", **kwargs):
        self.calls.append(dict(n_images=len(pil_image or []), prompt=prompt, scale=scale,
                               seed=seed, steps=num_inference_steps, use_image=use_image,
                               style=style, sizes=[im.size for im in pil_image or []]))
        if style == "comic":
            prompt = "best quality, high quality, comic " + prompt + " . graphic illustration"
        negative_prompt = negative_prompt or "monochrome, lowres, bad anatomy"
        embeds, negative, pooled, negative_pooled = self.pipe.encode_prompt(
            prompt, device=self.device, num_images_per_prompt=1,
            do_classifier_free_guidance=True, negative_prompt=negative_prompt)
        dim = embeds.shape[-1]
        if use_image and pil_image:
            pixels = self.processor(images=pil_image, return_tensors="pt").pixel_values
            with torch.no_grad():
                vector = self.image_encoder(pixels).image_embeds.mean(dim=0, keepdim=True)
                tokens = self.image_proj(vector).reshape(1, self.num_tokens, dim) * scale
        else:
            tokens = torch.zeros(1, self.num_tokens, dim)
        embeds = torch.cat([embeds, tokens], dim=1)
        negative = torch.cat([negative, torch.zeros_like(tokens)], dim=1)
        generator = torch.Generator("cpu").manual_seed(seed)
        return self.pipe(prompt_embeds=embeds, negative_prompt_embeds=negative,
                         pooled_prompt_embeds=pooled, negative_pooled_prompt_embeds=negative_pooled,
                         num_inference_steps=num_inference_steps, generator=generator,
                         num_images_per_prompt=num_samples, guidance_scale=7.5).images
'''


def build_source_tree(root: Path) -> Path:
    """The stand-in checkout (no torch needed)."""
    for name, text in {
        "ip_adapter/__init__.py": INIT_SOURCE,
        "ip_adapter/ip_adapter.py": ADAPTER_SOURCE,
    }.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def build_ip_adapter(root: Path, cross_attention_dim: int = 64, seed: int = 0) -> dict[str, Path]:
    """A tiny CLIP vision encoder directory and an ``ip_ckpt`` file for the tiny SDXL."""
    import torch
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(seed)
    encoder = root / "image_encoder"
    CLIPVisionModelWithProjection(
        CLIPVisionConfig(
            hidden_size=32,
            intermediate_size=37,
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=32,
            patch_size=8,
            projection_dim=32,
        )
    ).save_pretrained(encoder)
    CLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    ).save_pretrained(encoder)
    projection = torch.nn.Linear(32, cross_attention_dim * 4)
    ckpt = root / "ip-adapter_sdxl.bin"
    torch.save({"image_proj": projection.state_dict(), "ip_adapter": {}}, ckpt)
    return {"image_encoder": encoder, "ip_ckpt": ckpt}
