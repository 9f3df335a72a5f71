"""Stand-ins for Omni-Diffusion, built offline by the tests.

Neither the 8B checkpoint nor the git repository can be fetched here, so the tests build:

* a **checkpoint** laid out like ``lijiang/Omni-Diffusion``: ``config.json`` whose ``auto_map``
  names ``configuration_dream.DreamConfig`` / ``modeling_dream.DreamModel`` -- stand-in remote code
  written below, with tiny real torch weights saved by ``save_pretrained`` -- and a byte-level
  tokenizer carrying Omni-Diffusion's special tokens and ``<|audio_i|>`` / ``<|image_i|>``
  vocabularies (smaller: 64 audio codes, 512 image codes);
* a **source tree** with the module names the plugin imports from a VITA-MLLM/Omni-Diffusion
  checkout: ``omni_diffusion/data/processor/image_processor.py`` (``image_transform``),
  ``omni_diffusion/models/magvit/modeling_magvitv2.py`` (``MAGVITv2``) and the GLM-4-Voice
  submodule's ``flow_inference.py`` (``AudioDecoder``), plus the Matcha-TTS package directory;
* a **MAGVIT-v2** directory and a **GLM-4-Voice decoder** directory (``config.yaml``, ``flow.pt``,
  ``hift.pt``) with tiny real weights for those stand-in classes.

The stand-in model's ``generate`` / ``diffusion_generate`` keep Dream's signatures and run a real
masked-diffusion loop over its tiny network (one forward per step, the most confident masked slots
committed first).  What it commits is scripted by its config so that tests can choose the answer:
for a planning prompt, the text of the first ``responses`` entry whose key occurs in the prompt; for
task ``T2I``, ``t2i_image_tokens`` image tokens chosen by the network; for task ``TTS``,
``tts_audio_tokens`` audio tokens chosen by the network.  ``fail_task`` makes a task raise.  Each
call is recorded in ``model.calls``.  Omni-Diffusion's real network, sampler and decoders are not
exercised.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

AUDIO_CODES = 64
IMAGE_CODES = 512
SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|mask|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_audio|>",
    "<|end_of_audio|>",
)

CONFIGURATION_SOURCE = '''\
"""Test stand-in for Omni-Diffusion's remote configuration (configuration_dream.py)."""

from transformers import PretrainedConfig


class DreamConfig(PretrainedConfig):
    model_type = "Dream"

    def __init__(self, vocab_size=1024, hidden_size=16, mask_token_id=0, pad_token_id=0,
                 responses=None, default_response="", t2i_image_tokens=256, tts_audio_tokens=24,
                 fail_task=None, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.mask_token_id = mask_token_id
        self.responses = responses or []
        self.default_response = default_response
        self.t2i_image_tokens = t2i_image_tokens
        self.tts_audio_tokens = tts_audio_tokens
        self.fail_task = fail_task
        super().__init__(pad_token_id=pad_token_id, **kwargs)
'''

MODELING_SOURCE = '''\
"""Test stand-in for Omni-Diffusion's remote model (modeling_dream.py): Dream's ``generate`` and
``diffusion_generate`` signatures over a tiny network; the committed tokens are scripted."""

import math

import torch
from torch import nn
from transformers import PreTrainedModel

from .configuration_dream import DreamConfig

ALGORITHMS = ("origin", "maskgit_plus", "topk_margin", "entropy", "entropy-penalty")


class DreamModel(PreTrainedModel):
    config_class = DreamConfig
    base_model_prefix = "model"

    def __init__(self, config):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.mixer = nn.Linear(config.hidden_size, config.hidden_size)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.calls = []
        self._prompt_ids = None
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, std=0.5)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

    def forward_dream(self, context, x):
        """Logits of the generated slots ``x`` given the mean prompt embedding ``context``."""
        return self.lm_head(torch.tanh(self.mixer(self.embed_tokens(x) + context)))

    @torch.no_grad()
    def generate(self, input_ids=None, audios=None, audio_indices=None, max_new_tokens=512,
                 steps=512, temperature=0.2, top_p=0.95, alg_temp=0.0, alg="entropy",
                 output_history=False, **kwargs):
        if audios is not None or audio_indices is not None:
            raise NotImplementedError("the stand-in has no audio encoder")
        self._prompt_ids = input_ids
        inputs_embeds = self.embed_tokens(input_ids)
        return self.diffusion_generate(None, inputs_embeds=inputs_embeds,
                                       max_new_tokens=max_new_tokens, steps=steps,
                                       temperature=temperature, top_p=top_p, alg=alg,
                                       alg_temp=alg_temp, output_history=output_history,
                                       return_dict_in_generate=True, **kwargs)

    def _choose(self, logits, first, count, n):
        """n codes of the vocabulary slice [first, first + count), picked by the network."""
        scores = logits[0, :n, first:first + count] if n <= logits.shape[1] else None
        if scores is None:
            scores = logits[0, :1, first:first + count].repeat(n, 1)
        return (scores.argmax(dim=-1) + first).tolist()

    @torch.no_grad()
    def diffusion_generate(self, inputs=None, generation_config=None, inputs_embeds=None,
                           prefix_lm=False, alg=None, block_size=-1, cfg=0.0, add_boa_token=False,
                           **kwargs):
        config = self.config
        tokenizer = kwargs["tokenizer"]
        task = kwargs.get("task")
        max_new = int(kwargs["max_new_tokens"])
        steps = min(int(kwargs["steps"]), max_new)
        if alg not in ALGORITHMS:
            raise RuntimeError(f"Unknown alg: {alg}")
        if cfg > 0 and task != "T2I":
            raise RuntimeError("classifier-free guidance is only defined for T2I")
        prompt = tokenizer.decode(self._prompt_ids[0].tolist(), skip_special_tokens=False)
        self.calls.append({
            "task": task, "prompt": prompt, "max_new_tokens": max_new, "steps": kwargs["steps"],
            "alg": alg, "temperature": kwargs.get("temperature"), "top_p": kwargs.get("top_p"),
            "cfg": cfg, "repeat_penalty": kwargs.get("repeat_penalty"),
            "max_position_penalty": kwargs.get("max_position_penalty"),
            "add_boa_token": add_boa_token, "output_text_only": kwargs.get("output_text_only"),
            "inputs_is_none": inputs is None, "prompt_tokens": int(inputs_embeds.shape[1]),
        })
        if config.fail_task is not None and task == config.fail_task:
            raise RuntimeError(f"stand-in failure in task {task!r}")
        start = inputs_embeds.shape[1]
        mask, eos = config.mask_token_id, config.pad_token_id
        x = torch.full((1, start + max_new), mask, dtype=torch.long, device=inputs_embeds.device)
        x[:, :start] = 0  # Dream keeps zeros where the prompt embeddings go
        context = inputs_embeds.mean(dim=1, keepdim=True)
        first = self.forward_dream(context, x[:, start:])
        audio_0 = tokenizer.convert_tokens_to_ids("<|audio_0|>")
        image_0 = tokenizer.convert_tokens_to_ids("<|image_0|>")
        if task == "T2I" and config.t2i_image_tokens > 0:
            target = self._choose(first, image_0, config.vocab_size - image_0,
                                  config.t2i_image_tokens)
        elif task == "TTS" and config.tts_audio_tokens > 0:
            codes = self._choose(first, audio_0, image_0 - audio_0, config.tts_audio_tokens)
            begin = tokenizer.convert_tokens_to_ids("<|begin_of_audio|>")
            end = tokenizer.convert_tokens_to_ids("<|end_of_audio|>")
            target = [begin] + codes + [end]
        else:
            answer = next((text for key, text in config.responses if key in prompt),
                          config.default_response)
            target = tokenizer(answer, add_special_tokens=False)["input_ids"]
        target = (list(target) + [eos] * max_new)[:max_new]
        target = torch.tensor([target], dtype=torch.long, device=x.device)
        histories = []
        for i in range(steps):
            masked = x[0, start:] == mask
            remaining = int(masked.sum())
            if remaining == 0:
                break
            logits = self.forward_dream(context, x[:, start:])
            confidence = logits[0].float().max(dim=-1).values
            confidence = confidence.masked_fill(~masked, float("-inf"))
            count = math.ceil(remaining / (steps - i))
            chosen = torch.topk(confidence, count).indices
            x[0, start + chosen] = target[0, chosen]
            histories.append(x.clone())
        return x, histories
'''

IMAGE_PROCESSOR_SOURCE = '''\
"""Test stand-in for omni_diffusion/data/processor/image_processor.py: ``image_transform``."""

import numpy as np
import torch
from PIL import Image


def image_transform(image, resolution=256):
    """Shorter side to ``resolution`` (bicubic), centre crop, [-1, 1] CHW tensor."""
    width, height = image.size
    scale = resolution / min(width, height)
    size = (max(resolution, round(width * scale)), max(resolution, round(height * scale)))
    image = image.resize(size, Image.BICUBIC)
    left, top = (size[0] - resolution) // 2, (size[1] - resolution) // 2
    image = image.crop((left, top, left + resolution, top + resolution))
    array = np.asarray(image, dtype=np.float32) / 255.0
    return (torch.from_numpy(array).permute(2, 0, 1) - 0.5) / 0.5
'''

MAGVIT_SOURCE = '''\
"""Test stand-in for omni_diffusion/models/magvit/modeling_magvitv2.py: ``MAGVITv2`` with
``from_pretrained``, ``get_code`` and ``decode_code`` (tiny real weights)."""

import json
import math
import os

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn


class MAGVITv2(nn.Module):
    def __init__(self, codebook_size=512, dim=8, patch=64, upscale=4):
        super().__init__()
        self.patch, self.upscale = patch, upscale
        self.codebook = nn.Embedding(codebook_size, dim)
        self.encode_proj = nn.Conv2d(3, dim, 1)
        self.decode_proj = nn.Conv2d(dim, 3, 1)

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        with open(os.path.join(path, "config.json")) as fh:
            model = cls(**json.load(fh))
        model.load_state_dict(load_file(os.path.join(path, "pytorch_model.safetensors")))
        return model

    def get_code(self, pixel_values):
        feats = self.encode_proj(F.avg_pool2d(pixel_values, self.patch))
        flat = feats.flatten(2).transpose(1, 2)
        book = self.codebook.weight[None].expand(flat.shape[0], -1, -1)
        return torch.cdist(flat, book).argmin(dim=-1)

    def decode_code(self, codebook_indices, shape=None):
        batch, count = codebook_indices.shape
        side = int(math.isqrt(count))
        emb = self.codebook(codebook_indices).transpose(1, 2)
        emb = emb.reshape(batch, -1, side, side)
        image = torch.tanh(self.decode_proj(emb))
        return F.interpolate(image, scale_factor=self.upscale, mode="nearest")
'''

FLOW_INFERENCE_SOURCE = '''\
"""Test stand-in for GLM-4-Voice's flow_inference.py: ``AudioDecoder.token2wav``."""

import torch
import yaml
from torch import nn


class _Flow(nn.Module):
    def __init__(self, codes, mel_bins, frames_per_token):
        super().__init__()
        self.frames_per_token = frames_per_token
        self.embed = nn.Embedding(codes, mel_bins)

    def inference(self, token, option_steps):
        mu = self.embed(token).repeat_interleave(self.frames_per_token, dim=1).transpose(1, 2)
        x = torch.randn_like(mu) * 0.1
        for _ in range(option_steps):
            x = x + (mu - x) * 0.5
        return x


class _HiFT(nn.Module):
    def __init__(self, mel_bins, hop):
        super().__init__()
        self.proj = nn.Linear(mel_bins, hop)

    def inference(self, mel):
        frames = torch.tanh(self.proj(mel.transpose(1, 2))) * 0.5
        return frames.reshape(1, -1)


class AudioDecoder:
    def __init__(self, config_path, flow_ckpt_path, hift_ckpt_path, device="cuda"):
        self.device = device
        with open(config_path) as fh:
            config = yaml.safe_load(fh)
        self.flow = _Flow(config["codes"], config["mel_bins"], config["frames_per_token"])
        self.flow.load_state_dict(torch.load(flow_ckpt_path, map_location=device))
        self.hift = _HiFT(config["mel_bins"], config["hop"])
        self.hift.load_state_dict(torch.load(hift_ckpt_path, map_location=device))
        self.flow.to(device)
        self.hift.to(device)
        self.calls = []

    def token2wav(self, token, uuid, prompt_token=torch.zeros(1, 0, dtype=torch.int32),
                  prompt_feat=torch.zeros(1, 0, 80), embedding=torch.zeros(1, 192),
                  finalize=False, option_steps=10):
        self.calls.append({"codes": token.tolist(), "finalize": finalize,
                           "option_steps": option_steps, "prompt_token": tuple(prompt_token.shape),
                           "prompt_feat": tuple(prompt_feat.shape)})
        mel = self.flow.inference(token.to(self.device), option_steps)
        return self.hift.inference(mel), mel
'''


def byte_tokenizer(audio_codes: int = AUDIO_CODES, image_codes: int = IMAGE_CODES):
    """A byte-level tokenizer with Omni-Diffusion's special tokens, then ``<|audio_i|>`` and
    ``<|image_i|>`` (in that order: the audio vocabulary lies just below the image vocabulary)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(char, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens(
        [AddedToken(f"<|audio_{i}|>", special=False, normalized=False) for i in range(audio_codes)]
    )
    tok.add_tokens(
        [AddedToken(f"<|image_{i}|>", special=False, normalized=False) for i in range(image_codes)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        mask_token="<|mask|>",
        model_max_length=131072,
    )


DEFAULT_RESPONSES = [
    [
        "IMAGE_PROMPT",
        "NARRATION: Pip taps the glass.\nSPEAKER: Pip\nSPEECH: Come quick!\n"
        "IMAGE_PROMPT: A fox at a window.",
    ],
    ["SPEECH", "SPEAKER: Pip\nSPEECH: Hurry up!"],
]


def build_checkpoint(path: Path, seed: int = 0, **config: Any) -> Path:
    """The stand-in remote-code checkpoint: code files, ``config.json`` with ``auto_map``, tiny
    weights (``save_pretrained``) and the tokenizer.  ``config`` overrides the scripting fields."""
    import torch
    from transformers import AutoConfig, AutoModel

    path.mkdir(parents=True, exist_ok=True)
    (path / "configuration_dream.py").write_text(CONFIGURATION_SOURCE)
    (path / "modeling_dream.py").write_text(MODELING_SOURCE)
    tokenizer = byte_tokenizer()
    tokenizer.save_pretrained(path)
    fields = {
        "vocab_size": len(tokenizer),
        "hidden_size": 16,
        "mask_token_id": tokenizer.convert_tokens_to_ids("<|mask|>"),
        "pad_token_id": tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        "responses": DEFAULT_RESPONSES,
        "default_response": "",
        "t2i_image_tokens": 256,
        "tts_audio_tokens": 24,
        "fail_task": None,
        **config,
    }
    (path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["DreamModel"],
                "model_type": "Dream",
                "auto_map": {
                    "AutoConfig": "configuration_dream.DreamConfig",
                    "AutoModel": "modeling_dream.DreamModel",
                },
                **fields,
            },
            indent=2,
        )
    )
    torch.manual_seed(seed)
    loaded = AutoConfig.from_pretrained(path, trust_remote_code=True)
    model = AutoModel.from_config(loaded, trust_remote_code=True)
    model.save_pretrained(path)
    return path


def variant(base: Path, path: Path, **config: Any) -> Path:
    """A copy of the checkpoint ``base`` with some config fields changed (same weights)."""
    shutil.copytree(base, path)
    data = json.loads((path / "config.json").read_text())
    data.update(config)
    (path / "config.json").write_text(json.dumps(data, indent=2))
    return path


def build_source_tree(path: Path) -> Path:
    """A directory shaped like a VITA-MLLM/Omni-Diffusion checkout with its submodules."""
    files = {
        "omni_diffusion/__init__.py": "",
        "omni_diffusion/data/__init__.py": "",
        "omni_diffusion/data/processor/__init__.py": "",
        "omni_diffusion/data/processor/image_processor.py": IMAGE_PROCESSOR_SOURCE,
        "omni_diffusion/models/__init__.py": "",
        # upstream has no __init__.py in models/magvit (a namespace package)
        "omni_diffusion/models/magvit/modeling_magvitv2.py": MAGVIT_SOURCE,
        "third_party/GLM-4-Voice/flow_inference.py": FLOW_INFERENCE_SOURCE,
        "third_party/GLM-4-Voice/cosyvoice/__init__.py": "",
        "third_party/GLM-4-Voice/third_party/Matcha-TTS/matcha/__init__.py": "",
    }
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return path


def _load_module(path: Path, name: str):
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build_magvit(path: Path, source: Path, seed: int = 0) -> Path:
    """MAGVIT-v2 stand-in weights (``config.json`` + ``pytorch_model.safetensors``)."""
    import torch
    from safetensors.torch import save_file

    module = _load_module(
        source / "omni_diffusion/models/magvit/modeling_magvitv2.py", "_standin_magvit"
    )
    config = {"codebook_size": IMAGE_CODES, "dim": 8, "patch": 64, "upscale": 4}
    torch.manual_seed(seed)
    model = module.MAGVITv2(**config)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()},
        str(path / "pytorch_model.safetensors"),
    )
    return path


def build_decoder(path: Path, source: Path, seed: int = 0) -> Path:
    """GLM-4-Voice decoder stand-in: ``config.yaml``, ``flow.pt``, ``hift.pt``."""
    import torch

    module = _load_module(source / "third_party/GLM-4-Voice/flow_inference.py", "_standin_flow")
    config = {"codes": AUDIO_CODES, "mel_bins": 80, "frames_per_token": 2, "hop": 256}
    torch.manual_seed(seed)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text("\n".join(f"{k}: {v}" for k, v in config.items()) + "\n")
    flow = module._Flow(config["codes"], config["mel_bins"], config["frames_per_token"])
    hift = module._HiFT(config["mel_bins"], config["hop"])
    torch.save(flow.state_dict(), path / "flow.pt")
    torch.save(hift.state_dict(), path / "hift.pt")
    return path


def build_all(root: Path) -> dict[str, Path]:
    source = build_source_tree(root / "Omni-Diffusion")
    return {
        "source_dir": source,
        "model": build_checkpoint(root / "Omni-Diffusion-ckpt"),
        "image_tokenizer": build_magvit(root / "magvitv2", source),
        "audio_decoder": build_decoder(root / "glm-4-voice-decoder", source),
    }
