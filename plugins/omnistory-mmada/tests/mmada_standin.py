"""A stand-in for the Gen-Verse/MMaDA checkout, and tiny checkpoints for it.

MMaDA's code is a git repository that cannot be installed here (and its 8B weights cannot be
downloaded), so the tests write a source tree with the module names, classes and call signatures
the plugin uses -- ``models`` (``MMadaModelLM``, ``MAGVITv2``, ``get_mask_schedule``),
``training.prompting_utils.UniversalPrompting`` and ``training.utils.image_transform`` -- and build
tiny checkpoints for it with ``save_pretrained``.  The plugin's own code then runs unchanged:
``source_dir`` on ``sys.path``, the imports, the ``from_pretrained`` calls, the MMU input layout,
the T2I call and the decoding.

What the stand-in model does (it is not MMaDA): ``mmu_generate`` runs a real forward pass over the
whole input, then answers with a scripted token sequence chosen by a trigger found in the prompt
(the checkpoint's ``scripts``), truncated or padded to ``max_new_tokens`` like a fixed-length
diffusion answer; ``t2i_generate`` checks the input layout and samples codes with the generator
it is given, and raises when the prompt holds the checkpoint's ``fail_t2i_trigger``.  MAGVIT-v2's
stand-in encodes with a 16x16-stride convolution (512 px -> 1024 codes) and decodes 1024 codes to
a 64x64 image.  Every call is recorded in ``model.calls``.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

CODEBOOK = 64
HIDDEN = 16
RESERVED = (
    "<|soi|>",
    "<|eoi|>",
    "<|sov|>",
    "<|eov|>",
    "<|t2i|>",
    "<|mmu|>",
    "<|t2v|>",
    "<|v2v|>",
    "<|lvg|>",
    "[iPAD]",
    "<|r2i|>",
)
CHAT = ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")
MASK = "<|mdm_mask|>"
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)

SOURCES = {
    "models/__init__.py": """
        from .modeling_magvitv2 import MAGVITv2
        from .modeling_mmada import MMadaConfig, MMadaModelLM
        from .sampling import cosine_schedule, get_mask_schedule, linear_schedule
    """,
    "models/sampling.py": """
        import math
        from functools import partial

        import torch


        def cosine_schedule(t):
            return torch.cos(t * math.pi * 0.5)


        def linear_schedule(t):
            return (1 - t).clamp(min=1e-6, max=1.0)


        def _power(t, exponent):
            return (1.0 - t**exponent).clamp(min=1e-6, max=1.0)


        def get_mask_schedule(method, **kwargs):
            if method == "cosine":
                return cosine_schedule
            if method == "linear":
                return linear_schedule
            if method.startswith("pow"):
                return partial(_power, exponent=float(method[3:]))
            raise ValueError(f"Unknown schedule method: {method}")
    """,
    "models/modeling_mmada.py": """
        import torch
        from torch import nn
        from transformers import PretrainedConfig, PreTrainedModel
        from transformers.modeling_outputs import CausalLMOutput


        class MMadaConfig(PretrainedConfig):
            model_type = "mmada"

            def __init__(self, vocab_size=1, hidden_size=16, mask_token_id=0, num_vq_tokens=1024,
                         codebook_size=64, llm_vocab_size=1, scripts=None,
                         fail_t2i_trigger=None, **kwargs):
                super().__init__(**kwargs)
                self.vocab_size = vocab_size
                self.hidden_size = hidden_size
                self.mask_token_id = mask_token_id
                self.num_vq_tokens = num_vq_tokens
                self.codebook_size = codebook_size
                self.llm_vocab_size = llm_vocab_size
                self.scripts = scripts or []
                self.fail_t2i_trigger = fail_t2i_trigger or []


        def _contains(sequence, part):
            n = len(part)
            return n == 0 or any(sequence[i:i + n] == part for i in range(len(sequence) - n + 1))


        class MMadaModelLM(PreTrainedModel):
            config_class = MMadaConfig
            base_model_prefix = "model"

            def __init__(self, config, *args, **kwargs):
                super().__init__(config)
                self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
                self.head = nn.Linear(config.hidden_size, config.vocab_size)
                self.calls = []
                self.post_init()

            def forward(self, input_ids, attention_bias=None, **kwargs):
                return CausalLMOutput(logits=self.head(self.embed(input_ids)))

            @torch.no_grad()
            def mmu_generate(self, idx=None, input_embeddings=None, max_new_tokens=128,
                             steps=128, block_length=128, temperature=0.0, top_k=None,
                             eot_token=None, cfg_scale=0.0, remasking="low_confidence",
                             mask_id=None, attention_mask=None):
                assert max_new_tokens % block_length == 0
                assert steps % (max_new_tokens // block_length) == 0
                mask_id = self.config.mask_token_id if mask_id is None else mask_id
                rows, length = idx.shape
                x = torch.full((rows, length + max_new_tokens), mask_id, dtype=torch.long,
                               device=self.device)
                x[:, :length] = idx
                logits = self(x).logits
                assert torch.isfinite(logits.float()).all()
                prompt = idx[0].tolist()
                answer = next(s["answer"] for s in self.config.scripts
                              if _contains(prompt, s["trigger"]))
                answer = answer[:max_new_tokens]
                answer = answer + [self.config.eos_token_id] * (max_new_tokens - len(answer))
                x[:, length:] = torch.tensor(answer, device=self.device)
                self.calls.append({"kind": "mmu", "input_ids": idx.detach().cpu(),
                                   "max_new_tokens": max_new_tokens, "steps": steps,
                                   "block_length": block_length, "dtype": str(self.dtype),
                                   "autocast": torch.is_autocast_enabled()})
                return x

            @torch.no_grad()
            def t2i_generate(self, input_ids=None, uncond_input_ids=None, attention_mask=None,
                             uncond_attention_mask=None, temperature=1.0, timesteps=18,
                             guidance_scale=0, noise_schedule=None, generator=None, config=None,
                             seq_len=1024, mask_token_id=None, resolution=512,
                             codebook_size=8192, **kwargs):
                mask = self.config.mask_token_id
                image_part = input_ids[:, -(seq_len + 1):-1]
                assert bool((image_part == mask).all()), "the image slots must all be masked"
                assert attention_mask.shape == input_ids.shape
                if guidance_scale > 0:
                    assert uncond_input_ids is not None
                    assert uncond_input_ids.shape == input_ids.shape
                if _contains(input_ids[0].tolist(), self.config.fail_t2i_trigger):
                    raise RuntimeError("stand-in T2I pass crashed (CUDA out of memory)")
                self(input_ids)
                codes = torch.randint(0, self.config.codebook_size, (input_ids.shape[0], seq_len),
                                      generator=generator, device=input_ids.device)
                self.calls.append({
                    "kind": "t2i", "input_ids": input_ids.detach().cpu(),
                    "uncond_input_ids": None if uncond_input_ids is None
                    else uncond_input_ids.detach().cpu(),
                    "guidance_scale": guidance_scale, "temperature": temperature,
                    "timesteps": timesteps, "seq_len": seq_len,
                    "noise_type": kwargs.get("noise_type"),
                    "schedule_at_half": float(noise_schedule(torch.tensor(0.5))),
                    "has_generator": generator is not None,
                })
                return codes
    """,
    "models/modeling_magvitv2.py": """
        import torch
        import torch.nn.functional as F
        from diffusers import ConfigMixin, ModelMixin
        from diffusers.configuration_utils import register_to_config
        from torch import nn


        class MAGVITv2(ModelMixin, ConfigMixin):
            @register_to_config
            def __init__(self, codebook_size=64, stride=16):
                super().__init__()
                self.encoder = nn.Conv2d(3, codebook_size, kernel_size=stride, stride=stride)
                self.codebook = nn.Embedding(codebook_size, 3)

            def get_code(self, pixel_values):
                return self.encoder(pixel_values).argmax(dim=1).flatten(1)

            def decode_code(self, codes):
                side = int(codes.shape[1] ** 0.5)
                pixels = self.codebook(codes).view(codes.shape[0], side, side, 3)
                pixels = F.interpolate(pixels.permute(0, 3, 1, 2), scale_factor=2)
                return torch.tanh(pixels)
    """,
    "training/__init__.py": "",
    "training/prompting_utils.py": """
        import torch

        RESERVED = ("<|soi|>", "<|eoi|>", "<|sov|>", "<|eov|>", "<|t2i|>", "<|mmu|>", "<|t2v|>",
                    "<|v2v|>", "<|lvg|>", "[iPAD]", "<|r2i|>")


        class UniversalPrompting:
            def __init__(self, text_tokenizer, special_tokens=("<|soi|>", "<|eoi|>"),
                         max_text_len=8000, max_seq_len=377, ignore_id=-100,
                         cond_dropout_prob=0.1, use_reserved_token=False):
                assert use_reserved_token, "the stand-in implements the reserved-token path only"
                self.text_tokenizer = text_tokenizer
                ids = text_tokenizer.convert_tokens_to_ids
                self.sptids_dict = {name: torch.tensor([ids(name)]) for name in RESERVED}
                self.sptids_dict["<|sot|>"] = torch.tensor([text_tokenizer.bos_token_id])
                self.sptids_dict["<|eot|>"] = torch.tensor([text_tokenizer.eos_token_id])
                self.max_text_len = max_text_len + 1
                self.pad_id = ids("[iPAD]")
                self.ignore_id = ignore_id
                self.cond_dropout_prob = cond_dropout_prob

            def t2i_gen_prompt(self, text_ids, image_ids):
                bos, eos = self.text_tokenizer.bos_token_id, self.text_tokenizer.eos_token_id
                rows, masks = [], []
                for i, ids in enumerate(text_ids):
                    ids = list(ids)
                    if not ids or ids[0] != bos:
                        ids = [bos] + ids
                    ids = [int(self.sptids_dict["<|t2i|>"])] + ids + [eos]
                    if len(ids) <= self.max_text_len:
                        pad = self.max_text_len - len(ids)
                        mask = [0] * pad + [1] * (len(ids) + image_ids.shape[-1] + 2)
                        ids = [self.pad_id] * pad + ids
                    else:
                        ids = ids[: self.max_text_len - 1] + [eos]
                        mask = [1] * (len(ids) + image_ids.shape[-1] + 2)
                    row = torch.cat([
                        torch.tensor(ids, device=image_ids.device),
                        self.sptids_dict["<|soi|>"].to(image_ids.device),
                        image_ids[i],
                        self.sptids_dict["<|eoi|>"].to(image_ids.device),
                    ])
                    rows.append(row.unsqueeze(0))
                    masks.append(torch.tensor(mask, device=image_ids.device).unsqueeze(0))
                return torch.cat(rows), torch.cat(masks)

            def __call__(self, input, task, padding=True, config=None):
                if task != "t2i_gen":
                    raise NotImplementedError(task)
                text_ids = self.text_tokenizer(input[0])["input_ids"]
                return self.t2i_gen_prompt(text_ids, input[1])
    """,
    "training/utils.py": """
        import numpy as np
        import torch
        from PIL import Image


        def image_transform(image, resolution=256, normalize=True):
            scale = resolution / min(image.size)
            size = (max(resolution, round(image.width * scale)),
                    max(resolution, round(image.height * scale)))
            image = image.resize(size, Image.BICUBIC)
            left, top = (size[0] - resolution) // 2, (size[1] - resolution) // 2
            image = image.crop((left, top, left + resolution, top + resolution))
            pixels = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0)
            pixels = pixels.permute(2, 0, 1).contiguous()
            return (pixels - 0.5) / 0.5 if normalize else pixels
    """,
}


def write_source_tree(root: Path) -> Path:
    """Write the stand-in checkout under ``root`` and return it."""
    for name, text in SOURCES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return root


def build_tokenizer(directory: Path):
    """A byte-level tokenizer with MMaDA's reserved tokens and a LLaDA-style chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|startoftext|>",
        eos_token="<|endoftext|>",
        additional_special_tokens=[*CHAT, MASK, *RESERVED],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    return tokenizer


def _import_standin(tree: Path):
    """The stand-in's ``models`` package (imported from ``tree``, then forgotten again so the
    plugin's own import path is what the tests exercise)."""
    import importlib

    sys.path.insert(0, str(tree))
    try:
        for name in [n for n in sys.modules if n.split(".")[0] in ("models", "training")]:
            del sys.modules[name]
        return importlib.import_module("models")
    finally:
        sys.path.remove(str(tree))
        for name in [n for n in sys.modules if n.split(".")[0] in ("models", "training")]:
            del sys.modules[name]


def build_checkpoints(
    tree: Path,
    directory: Path,
    scripts: list[tuple[str, str]],
    fail_t2i_trigger: str = "",
) -> tuple[Path, Path]:
    """A tiny MMaDA checkpoint (weights, config with the scripted answers, tokenizer) and a tiny
    MAGVIT-v2 checkpoint, both written with ``save_pretrained``.  ``scripts`` are (trigger text,
    answer text) pairs; an empty trigger matches every prompt."""
    import torch

    models = _import_standin(tree)
    model_dir, vq_dir = directory / "mmada", directory / "magvitv2"
    tokenizer = build_tokenizer(model_dir)

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    torch.manual_seed(0)
    config = models.MMadaConfig(
        vocab_size=len(tokenizer) + CODEBOOK,
        hidden_size=HIDDEN,
        mask_token_id=tokenizer.convert_tokens_to_ids(MASK),
        num_vq_tokens=1024,
        codebook_size=CODEBOOK,
        llm_vocab_size=len(tokenizer),
        scripts=[{"trigger": encode(t), "answer": encode(a)} for t, a in scripts],
        fail_t2i_trigger=encode(fail_t2i_trigger) if fail_t2i_trigger else [],
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    models.MMadaModelLM(config).save_pretrained(model_dir)
    models.MAGVITv2(codebook_size=CODEBOOK, stride=16).save_pretrained(vq_dir)
    return model_dir, vq_dir
