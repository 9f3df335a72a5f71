"""Stand-ins for ``implementation=remote_code``, written by the tests.

* a source tree with the upstream module path ``emu3/mllm/processing_emu3.py`` and a class
  ``Emu3Processor(image_processor, vision_tokenizer, tokenizer)`` with the upstream call
  signatures (``__call__(text, image, *, mode, ratio, image_area, padding_image, **kwargs)``,
  ``batch_decode``, ``decode``, ``build_prefix_constrained_fn(height, width)``); our own small
  implementation of the documented behaviour, not the upstream code;
* a vision-tokenizer checkpoint whose image processor and model are remote code
  (``auto_map``, loaded with ``trust_remote_code=True``): 8x8 patches -> nearest of 32 colours;
* Chat and Gen checkpoints: tiny random Llama models (``AutoModelForCausalLM`` loads them with
  ``trust_remote_code=True`` like the originals) and a tokenizer exposing the upstream Emu3Tokenizer
  attributes (``img_token``, ``boi_token``, ``eoi_token``, ``eol_token``, ``eof_token``).
"""

from __future__ import annotations

import json
from pathlib import Path

CODEBOOK = 32
SPECIAL = {
    "bos_token": "<|extra_203|>",
    "eos_token": "<|extra_204|>",
    "pad_token": "<|endoftext|>",
}
EXTRA = {
    "img_token": "<|image token|>",
    "boi_token": "<|image start|>",
    "eoi_token": "<|image end|>",
    "eol_token": "<|extra_200|>",
    "eof_token": "<|extra_201|>",
}
VISUAL = [f"<|visual token {i:06d}|>" for i in range(CODEBOOK)]

PROCESSOR_SOURCE = '''
"""Stand-in for the upstream emu3/mllm/processing_emu3.py (test fixture)."""
import re

import numpy as np
import torch
from PIL import Image
from transformers.feature_extraction_utils import BatchFeature

VISUAL = "<|visual token {:06d}|>"
VISUAL_RE = re.compile(r"<\\|visual token (\\d+)\\|>")
TEMPLATE = "You are a helpful assistant. USER: {image_prompt}{text_prompt}. ASSISTANT:"


class Emu3Processor:
    def __init__(self, image_processor=None, vision_tokenizer=None, tokenizer=None,
                 chat_template=TEMPLATE, **kwargs):
        self.image_processor = image_processor
        self.vision_tokenizer = vision_tokenizer
        self.tokenizer = tokenizer
        self.chat_template = chat_template

    def _grid(self, codes):
        rows = ["".join(VISUAL.format(int(c)) for c in row) for row in codes.tolist()]
        return self.tokenizer.eol_token.join(rows)

    @torch.no_grad()
    def __call__(self, text=None, image=None, *, mode="G", ratio="1:1", image_area=518400,
                 padding_image=False, **kwargs):
        texts = [text] if isinstance(text, str) else list(text)
        prompts, sizes = [], []
        t = self.tokenizer
        if mode == "U":
            images = [image] if isinstance(image, Image.Image) else list(image)
            pixels = self.image_processor(images, return_tensors="pt")["pixel_values"]
            codes = self.vision_tokenizer.encode(pixels.to(self.vision_tokenizer.device))
            for prompt, grid in zip(texts, codes):
                h, w = grid.shape
                header = t.boi_token + f"{h}*{w}" + t.img_token
                image_prompt = header + self._grid(grid) + t.eol_token + t.eof_token + t.eoi_token
                prompts.append(t.bos_token + self.chat_template.format(
                    image_prompt=image_prompt, text_prompt=prompt))
                sizes.append([h, w])
        else:
            ratios = [ratio] * len(texts) if isinstance(ratio, str) else list(ratio)
            for prompt, r in zip(texts, ratios):
                rw, rh = (int(v) for v in r.split(":"))
                scale = (image_area / (rw * rh)) ** 0.5
                factor = self.vision_tokenizer.spatial_scale_factor
                h, w = int(round(rh * scale / factor)), int(round(rw * scale / factor))
                prompts.append(t.bos_token + prompt + t.boi_token + f"{h}*{w}" + t.img_token)
                sizes.append([h, w])
        encoded = t(prompts, **{k: v for k, v in kwargs.items() if k != "return_tensors"},
                    return_tensors=kwargs.get("return_tensors"))
        return BatchFeature(data={**encoded, "image_size": torch.tensor(sizes)})

    def _decode_text(self, doc):
        t = self.tokenizer
        parts = []
        for chunk in re.split(f"({re.escape(t.boi_token)}.*?{re.escape(t.eoi_token)})", doc):
            if not chunk:
                continue
            if t.boi_token in chunk:
                rows = [[int(v) for v in VISUAL_RE.findall(r)] for r in chunk.split(t.eol_token)]
                rows = [r for r in rows if r]
                codes = torch.tensor([rows], device=self.vision_tokenizer.device)
                pixels = self.vision_tokenizer.decode(codes).float()
                parts.append(self.image_processor.postprocess(pixels)["pixel_values"][0])
            else:
                parts.append(chunk)
        return parts if len(parts) > 1 else (parts[0] if parts else "")

    def batch_decode(self, *args, **kwargs):
        return [self._decode_text(d) for d in self.tokenizer.batch_decode(*args, **kwargs)]

    def decode(self, *args, **kwargs):
        return self._decode_text(self.tokenizer.decode(*args, **kwargs))

    def build_prefix_constrained_fn(self, height, width):
        t = self.tokenizer
        ids = {name: t.convert_tokens_to_ids(getattr(t, name)) for name in
               ("img_token", "eol_token", "eof_token", "eoi_token", "eos_token", "pad_token")}
        visual = t.convert_tokens_to_ids([VISUAL.format(i) for i in
                                          range(self.vision_tokenizer.config.codebook_size)])
        h, w = int(height[0]), int(width[0])

        def allowed(batch_id, input_ids):
            start = int(torch.nonzero(input_ids == ids["img_token"])[0][0])
            offset = input_ids.shape[0] - start
            if offset <= h * (w + 1):
                return [ids["eol_token"]] if offset % (w + 1) == 0 else visual
            tail = offset - h * (w + 1)
            return [{1: ids["eof_token"], 2: ids["eoi_token"], 3: ids["eos_token"]}.get(
                tail, ids["pad_token"])]

        return allowed
'''

VQ_CONFIG_SOURCE = """
from transformers import PretrainedConfig


class StandInVQConfig(PretrainedConfig):
    model_type = "standin_emu3_vq"

    def __init__(self, codebook_size=32, ch_mult=(1, 1, 1, 1), **kwargs):
        self.codebook_size = codebook_size
        self.ch_mult = list(ch_mult)
        super().__init__(**kwargs)
"""

VQ_MODEL_SOURCE = '''
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from .configuration_standin_vq import StandInVQConfig


class StandInVQModel(PreTrainedModel):
    """Each 8x8 patch becomes the nearest of codebook_size colours, and back."""

    config_class = StandInVQConfig
    main_input_name = "pixel_values"

    def __init__(self, config):
        super().__init__(config)
        self.codebook = torch.nn.Parameter(torch.rand(config.codebook_size, 3) * 2 - 1)
        self.spatial_scale_factor = 2 ** (len(config.ch_mult) - 1)
        self.post_init()

    def _init_weights(self, module):
        pass

    def encode(self, x):
        pooled = F.avg_pool2d(x.float(), self.spatial_scale_factor)
        flat = pooled.permute(0, 2, 3, 1)
        return torch.cdist(flat.reshape(-1, 3), self.codebook.float()).argmin(-1).view(
            flat.shape[:3])

    def decode(self, codes):
        colours = self.codebook[codes].permute(0, 3, 1, 2)
        return F.interpolate(colours, scale_factor=self.spatial_scale_factor, mode="nearest")
'''

VQ_IMAGE_PROCESSOR_SOURCE = """
import numpy as np
import torch
from PIL import Image
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature


class StandInVQImageProcessor(BaseImageProcessor):
    model_input_names = ["pixel_values"]

    def __init__(self, size=32, **kwargs):
        super().__init__(**kwargs)
        self.size = size

    def preprocess(self, images, return_tensors=None, **kwargs):
        images = [images] if isinstance(images, Image.Image) else list(images)
        arrays = [np.asarray(im.convert("RGB").resize((self.size, self.size)), np.float32)
                  for im in images]
        pixels = torch.tensor(np.stack(arrays)).permute(0, 3, 1, 2) / 127.5 - 1.0
        return BatchFeature(data={"pixel_values": pixels})

    def postprocess(self, images, **kwargs):
        arrays = ((images.clamp(-1, 1) + 1) * 127.5).round().byte().permute(0, 2, 3, 1).cpu()
        return {"pixel_values": [Image.fromarray(a.numpy()) for a in arrays]}
"""


def write_source_tree(root: Path) -> Path:
    """``root/emu3/mllm/processing_emu3.py`` with the stand-in processor."""
    package = root / "emu3" / "mllm"
    package.mkdir(parents=True, exist_ok=True)
    (root / "emu3" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "processing_emu3.py").write_text(PROCESSOR_SOURCE)
    return root


def build_vq(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "configuration_standin_vq.py").write_text(VQ_CONFIG_SOURCE)
    (path / "modeling_standin_vq.py").write_text(VQ_MODEL_SOURCE)
    (path / "image_processing_standin_vq.py").write_text(VQ_IMAGE_PROCESSOR_SOURCE)
    import torch

    torch.manual_seed(0)
    config = {
        "model_type": "standin_emu3_vq",
        "codebook_size": CODEBOOK,
        "ch_mult": [1, 1, 1, 1],
        "architectures": ["StandInVQModel"],
        "auto_map": {
            "AutoConfig": "configuration_standin_vq.StandInVQConfig",
            "AutoModel": "modeling_standin_vq.StandInVQModel",
        },
    }
    (path / "config.json").write_text(json.dumps(config))
    from safetensors.torch import save_file

    save_file({"codebook": torch.rand(CODEBOOK, 3) * 2 - 1}, str(path / "model.safetensors"))
    processor = {
        "image_processor_type": "StandInVQImageProcessor",
        "size": 32,
        "auto_map": {"AutoImageProcessor": "image_processing_standin_vq.StandInVQImageProcessor"},
    }
    (path / "preprocessor_config.json").write_text(json.dumps(processor))
    return path


def build_tokenizer():
    from omnistory_testkit.checkpoints import tiny_tokenizer

    return tiny_tokenizer(
        ["a story page with a fox, a girl and the moon. 0123456789*"],
        vocab_size=300,
        special_tokens=[*SPECIAL.values(), *EXTRA.values(), *VISUAL],
        padding_side="left",
        extra_special_tokens=EXTRA,
        **SPECIAL,
    )


def build_llm(path: Path, *, image_area: int | None = None, seed: int = 0) -> Path:
    """A tiny random Llama with the stand-in tokenizer; Gen checkpoints carry ``image_area``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    if image_area is not None:
        config.image_area = image_area
    path.mkdir(parents=True, exist_ok=True)
    LlamaForCausalLM(config).eval().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
