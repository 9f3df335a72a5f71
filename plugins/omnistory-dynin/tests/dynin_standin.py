"""A stand-in for the AIDASLab/Dynin-Omni checkout and tiny checkpoints for it.

Dynin-Omni's code is a git repository and its 8B weights cannot be downloaded here, so the tests
write a source tree with the names the plugin imports -- ``models.DyninOmniModelLM`` and
``models.MAGVITv2`` -- plus a remote-code speech decoder checkpoint (``AutoConfig`` /
``AutoModel.from_config`` with ``trust_remote_code``, weights in ``model.safetensors`` under the
old ``weight_g`` / ``weight_v`` names), and build tiny checkpoints for all three with
``save_pretrained``.  The plugin's own code then runs unchanged: the imports from ``source_dir``,
every ``from_pretrained``, the sequence layout, the sampler loop and the decoding.

What the stand-ins do (they are not Dynin-Omni):

* ``DyninOmniModelLM`` mixes token embeddings with the mean of the attended positions.  It
  checks the call (``attention_bias`` boolean of shape (1, 1, L, L)), counts forwards, and adds
  a scripted bias to its logits so the joint pass writes a known narration (``script_text``,
  then end-of-text), ``script_speech_codes`` speech codes then end-of-audio, and one label per
  metadata slot.  The image span is left to the network (random codes drawn with the sampler's
  generator); the mask token is never likely.
* ``MAGVITv2`` encodes 16x16 patches to codes (336 px -> 441) and decodes codes to 16x16 blocks.
* The speech decoder writes a WAV of 40 ms per unit (a tone per code) for a known style, and
  raises ``KeyError`` for an unknown style string as EMOVA's does.
"""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

CODEBOOK = 64
SPEECH_CODEBOOK = 64
HIDDEN = 16
BOS, EOS, PAD, UNK = "<|startoftext|>", "<|endoftext|>", "<|pad|>", "[UNK]"
MASK, TASK = "<|mdm_mask|>", "<|reserved_ti2tis|>"
SOI, EOI, SOA, EOA = "<|soi|>", "<|eoi|>", "<|soa|>", "<|eoa|>"
SPECIALS = (BOS, EOS, PAD, UNK, MASK, TASK, SOI, EOI, SOA, EOA)
WORDS = (
    'Pip tapped on the window and said Hurry Lena the moon fell down he cried . , ! ? " : '
    "emotion speed pitch gender happy sad angry neutral slow normal fast low high male female "
    "a an of to in at it is was were with for her his she they we you I girl fox moon sky night "
    "star stars hill lantern meadow oak tree glass bedroom dark small orange yellow round "
    "characters scene text content ambient sound genre topic style name sex species role"
).split()
SCRIPT_TEXT = 'Pip tapped on the window . " Hurry , Lena ! " he cried .'
STYLES = (
    "gender-female_emotion-neutral_speed-normal_pitch-normal",
    "gender-male_emotion-happy_speed-fast_pitch-high",
)

SOURCES = {
    "models/__init__.py": """
        from .modeling_dynin_omni import DyninOmniConfig, DyninOmniModelLM
        from .modeling_magvitv2 import MAGVITv2
    """,
    "models/modeling_dynin_omni.py": """
        import torch
        from torch import nn
        from transformers import PretrainedConfig, PreTrainedModel
        from transformers.modeling_outputs import CausalLMOutput


        class DyninOmniConfig(PretrainedConfig):
            model_type = "omada"

            def __init__(self, vocab_size=1, hidden_size=16, mask_token_id=0, text_vocab=1,
                         image_codebook_size=64, speech_codebook_size=64, soa_id=0, eoa_id=0,
                         eos_id=0, text_slots=1, speech_slots=1, script_text=None,
                         script_speech_codes=0, tail_fields=None, strength=30.0, **kwargs):
                super().__init__(**kwargs)
                self.vocab_size = vocab_size
                self.hidden_size = hidden_size
                self.mask_token_id = mask_token_id
                self.text_vocab = text_vocab
                self.image_codebook_size = image_codebook_size
                self.speech_codebook_size = speech_codebook_size
                self.soa_id, self.eoa_id, self.eos_id = soa_id, eoa_id, eos_id
                self.text_slots, self.speech_slots = text_slots, speech_slots
                self.script_text = script_text or []
                self.script_speech_codes = script_speech_codes
                self.tail_fields = tail_fields or []
                self.strength = strength


        class DyninOmniModelLM(PreTrainedModel):
            config_class = DyninOmniConfig
            base_model_prefix = "model"

            def __init__(self, config, *args, **kwargs):
                super().__init__(config)
                self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
                self.mix = nn.Linear(config.hidden_size, config.hidden_size)
                self.head = nn.Linear(config.hidden_size, config.vocab_size)
                self.forwards = 0
                self.post_init()

            def forward(self, input_ids, attention_bias=None, **kwargs):
                assert attention_bias is not None and attention_bias.dtype == torch.bool
                assert attention_bias.shape == (input_ids.shape[0], 1, input_ids.shape[1],
                                                input_ids.shape[1])
                self.forwards += 1
                h = self.embed(input_ids)
                # the mean of the attended positions stands in for attention (linear in L)
                keys = attention_bias[:, 0].any(dim=1).to(h.dtype)[..., None]
                context = (h * keys).sum(1, keepdim=True) / keys.sum(1, keepdim=True)
                logits = self.head(h + torch.tanh(self.mix(context)))
                return CausalLMOutput(logits=logits + self.script_bias(input_ids).to(logits.dtype))

            def script_bias(self, input_ids):
                c = self.config
                bias = torch.zeros(*input_ids.shape, c.vocab_size, device=input_ids.device)
                bias[..., c.mask_token_id] = -1e4
                speech_base = c.text_vocab + c.image_codebook_size
                for row, ids in enumerate(input_ids.tolist()):
                    soa = max(i for i, t in enumerate(ids) if t == c.soa_id)
                    for i in range(c.text_slots):
                        target = c.script_text[i] if i < len(c.script_text) else c.eos_id
                        bias[row, soa - c.text_slots + i, target] += c.strength
                    for i in range(c.speech_slots):
                        if i < c.script_speech_codes:
                            target = speech_base + (i * 37 + 5) % c.speech_codebook_size
                        else:
                            target = c.eoa_id
                        bias[row, soa + 1 + i, target] += c.strength
                    end = soa + 1 + c.speech_slots
                    for p in range(end + 2, len(ids)):
                        for field, colon, label in c.tail_fields:
                            if ids[p - 2] == field and ids[p - 1] == colon:
                                bias[row, p, label] += c.strength
                return bias
    """,
    "models/modeling_magvitv2.py": """
        import torch
        import torch.nn.functional as F
        from torch import nn
        from transformers import PretrainedConfig, PreTrainedModel


        class MAGVITv2Config(PretrainedConfig):
            model_type = "magvitv2_standin"

            def __init__(self, codebook_size=64, patch=16, **kwargs):
                super().__init__(**kwargs)
                self.codebook_size = codebook_size
                self.patch = patch


        class MAGVITv2(PreTrainedModel):
            config_class = MAGVITv2Config
            base_model_prefix = "magvit"

            def __init__(self, config, *args, **kwargs):
                super().__init__(config)
                self.encoder = nn.Conv2d(3, config.codebook_size, config.patch, config.patch)
                self.codebook = nn.Embedding(config.codebook_size, 3)
                self.post_init()

            def get_code(self, pixel_values):
                assert float(pixel_values.min()) >= -1.0 and float(pixel_values.max()) <= 1.0
                return self.encoder(pixel_values).argmax(dim=1).flatten(1)

            def decode_code(self, codebook_indices, shape=None):
                side = int(codebook_indices.shape[1] ** 0.5)
                pixels = self.codebook(codebook_indices).view(-1, side, side, 3)
                pixels = F.interpolate(pixels.permute(0, 3, 1, 2), scale_factor=self.config.patch)
                return torch.tanh(pixels * 3)
    """,
}

SPEECH_SOURCES = {
    "configuration_standin_emova.py": """
        from transformers import PretrainedConfig


        class StandinEmovaConfig(PretrainedConfig):
            model_type = "standin_emova_speech"

            def __init__(self, u2s_style2idx=None, samples_per_unit=640, sample_rate=16000,
                         **kwargs):
                super().__init__(**kwargs)
                self.u2s_style2idx = u2s_style2idx or {}
                self.samples_per_unit = samples_per_unit
                self.sample_rate = sample_rate
    """,
    "modeling_standin_emova.py": """
        import math
        import re

        import numpy as np
        import soundfile as sf
        import torch
        from torch import nn
        from transformers import PreTrainedModel

        from .configuration_standin_emova import StandinEmovaConfig


        class StandinEmovaSpeechTokenizer(PreTrainedModel):
            config_class = StandinEmovaConfig
            base_model_prefix = "emova"

            def __init__(self, config):
                super().__init__(config)
                self.conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(1, 1, 3, padding=1))
                self.style_embedding = nn.Embedding(max(1, len(config.u2s_style2idx)), 4)
                self.decoded = []

            def decode(self, speech_unit, condition=None, output_wav_file="output.wav"):
                codes = [int(u) for u in re.findall(r"<\\|speech_(\\d+)\\|>", speech_unit)]
                style = self.config.u2s_style2idx[condition]
                with torch.no_grad():
                    loud = float(self.style_embedding.weight[style].abs().mean()) + 0.1
                n = self.config.samples_per_unit
                rate = self.config.sample_rate
                t = np.arange(n) / rate
                wave = np.concatenate(
                    [np.sin(2 * math.pi * (150 + 10 * c) * t) for c in codes]
                ).astype(np.float32)
                with torch.no_grad():
                    shaped = self.conv(torch.from_numpy(wave)[None, None]).flatten().numpy()
                audio = 0.5 * np.tanh(loud * (wave + 0.01 * shaped)).astype(np.float32)
                sf.write(output_wav_file, audio, rate)
                self.decoded.append({"codes": codes, "condition": condition})
                return audio
    """,
}


def write_source_tree(root: Path) -> Path:
    """Write the stand-in checkout under ``root`` (with a ``.git`` pointing at the pinned
    commit, read by the plugin without running git) and return it."""
    for name, text in SOURCES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    git = root / ".git"
    (git / "refs" / "heads").mkdir(parents=True, exist_ok=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text("d6e3ca874f399a976c42bd3c8a58eb469eb7e3a3\n")
    return root


def build_tokenizer(directory: Path):
    """A word-level tokenizer with the reserved tokens (one id per word, unknown words -> UNK)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for token in (*SPECIALS, *WORDS):
        vocab.setdefault(token, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=[MASK, TASK, SOI, EOI, SOA, EOA],
    )
    tokenizer.save_pretrained(directory)
    return tokenizer


def _import_standin(tree: Path):
    """The stand-in ``models`` package, imported from ``tree`` and forgotten again, so the
    plugin's own import path is what the tests exercise."""
    sys.path.insert(0, str(tree))
    try:
        for name in [n for n in sys.modules if n.split(".")[0] == "models"]:
            del sys.modules[name]
        return importlib.import_module("models")
    finally:
        sys.path.remove(str(tree))
        for name in [n for n in sys.modules if n.split(".")[0] == "models"]:
            del sys.modules[name]


def layout_for(tokenizer) -> dict[str, Any]:
    ids = tokenizer.convert_tokens_to_ids
    return {
        "task_id": ids(TASK),
        "soi_id": ids(SOI),
        "eoi_id": ids(EOI),
        "soa_id": ids(SOA),
        "eoa_id": ids(EOA),
        "image_codebook_size": CODEBOOK,
        "speech_codebook_size": SPEECH_CODEBOOK,
        "tokenizer_length": len(tokenizer),
        "model_type": "omada",
        "max_sequence_length": 4096,
    }


def build_model(
    tree: Path,
    directory: Path,
    *,
    speech_codes: int = 40,
    text_length: int = 128,
    speech_length: int = 125,
) -> dict[str, Any]:
    """A tiny DyninOmniModelLM checkpoint (weights, config, tokenizer) in ``directory``."""
    import torch

    models = _import_standin(tree)
    tokenizer = build_tokenizer(directory)
    ids = tokenizer.convert_tokens_to_ids
    torch.manual_seed(0)
    config = models.DyninOmniConfig(
        vocab_size=len(tokenizer) + CODEBOOK + SPEECH_CODEBOOK,
        hidden_size=HIDDEN,
        mask_token_id=ids(MASK),
        text_vocab=len(tokenizer),
        image_codebook_size=CODEBOOK,
        speech_codebook_size=SPEECH_CODEBOOK,
        soa_id=ids(SOA),
        eoa_id=ids(EOA),
        eos_id=tokenizer.eos_token_id,
        text_slots=text_length - 1,
        speech_slots=speech_length - 1,
        script_text=tokenizer.encode(SCRIPT_TEXT, add_special_tokens=False),
        script_speech_codes=speech_codes,
        tail_fields=[
            [ids("emotion"), ids(":"), ids("happy")],
            [ids("speed"), ids(":"), ids("fast")],
            [ids("pitch"), ids(":"), ids("high")],
            [ids("gender"), ids(":"), ids("male")],
        ],
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    models.DyninOmniModelLM(config).save_pretrained(directory)
    return layout_for(tokenizer)


def build_image_codec(tree: Path, directory: Path) -> Path:
    """A tiny MAGVITv2 checkpoint (stand-in class) in ``directory``."""
    import torch

    models = _import_standin(tree)
    torch.manual_seed(1)
    config = models.MAGVITv2.config_class(codebook_size=CODEBOOK, patch=16)
    models.MAGVITv2(config).save_pretrained(directory)
    return directory


def build_speech_codec(directory: Path) -> Path:
    """A remote-code speech decoder checkpoint: config.json with ``auto_map``, its two modules,
    and ``model.safetensors`` holding the weight-norm weights under their old names."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoConfig, AutoModel

    directory.mkdir(parents=True, exist_ok=True)
    for name, text in SPEECH_SOURCES.items():
        (directory / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    config = {
        "model_type": "standin_emova_speech",
        "architectures": ["StandinEmovaSpeechTokenizer"],
        "auto_map": {
            "AutoConfig": "configuration_standin_emova.StandinEmovaConfig",
            "AutoModel": "modeling_standin_emova.StandinEmovaSpeechTokenizer",
        },
        "u2s_style2idx": {style: i for i, style in enumerate(STYLES)},
        "samples_per_unit": 640,
        "sample_rate": 16000,
    }
    (directory / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    torch.manual_seed(2)
    loaded = AutoConfig.from_pretrained(directory, trust_remote_code=True)
    model = AutoModel.from_config(loaded, trust_remote_code=True)
    state = {
        key.replace(".parametrizations.weight.original0", ".weight_g").replace(
            ".parametrizations.weight.original1", ".weight_v"
        ): value.contiguous()
        for key, value in model.state_dict().items()
    }
    assert any(key.endswith(".weight_g") for key in state), sorted(state)
    save_file(state, str(directory / "model.safetensors"))
    return directory


def hydra_dict(mapping: dict[str, Any]) -> str:
    """``{a:1,b:x}``: a mapping as a Hydra command-line value."""
    return "{" + ",".join(f"{k}:{v}" for k, v in mapping.items()) + "}"
