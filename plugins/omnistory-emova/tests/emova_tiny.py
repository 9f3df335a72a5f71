"""Tiny checkpoints laid out like the EMOVA HF-format model and its speech tokenizer, built offline.

EMOVA's remote code (``modeling_emova.py``, ``processing_emova.py`` on the hub) and the git-only
speech tokenizer cannot be downloaded here, so each checkpoint carries *stand-in* remote code
written below, declared through ``auto_map`` the way the real checkpoints declare theirs.  The
stand-ins keep the names and call signatures the plugin uses:

* ``AutoModel`` -> ``modeling_emova.EMOVAForConditionalGeneration`` with ``generate(**inputs)``
  returning prompt + new tokens (a tiny random Qwen2 decoder behind Hugging Face's own
  ``generate``, so ``max_new_tokens``, ``no_repeat_ngram_size`` and ``logits_processor`` run for
  real), and an image path (pixel patches projected onto the ``<image>`` token positions);
* ``AutoProcessor`` -> ``processing_emova.EMOVAProcessor`` with ``apply_chat_template``,
  ``__call__(text=<conversation>, images=..., return_tensors="pt")``, ``set_speech_tokenizer``
  and ``batch_decode(..., speaker=..., output_wav_prefix=...)`` which writes ``<prefix>_<i>.wav``
  through the speech tokenizer and returns the wav paths;
* the speech tokenizer's ``AutoModel`` -> ``modeling_speech_tokenizer.EMOVASpeechTokenizer``
  with ``decode(units, condition=..., output_wav_file=...)`` (a tiny unit-to-waveform table).

What the model says is steered by a *script* stored in its config: a large logit bias towards
the scripted reply (one for prompts with an image, one for text-only prompts), so the tests can
choose well-formed JSON, JSON with a missing key, or a speech pass without units.  The bias is
added to the random model's logits before Hugging Face's logits processors run.  EMOVA's real
remote code and weights are not exercised.
"""

from __future__ import annotations

import json
from pathlib import Path

#: speech units of the tiny vocabulary (the real tokenizer has 4096: ``<|speech_0|>``..)
TINY_SPEECH_UNITS = 32
SAMPLING_RATE = 22050  # the EMOVA unit-to-speech config's rate

GOOD_REPLY = (
    '{"text": "Pip tapped on the glass and told Lena the moon had tumbled into the pond.", '
    '"quote": "Hurry, Lena, the moon fell into the pond!", '
    '"t2i": "A small orange fox tapping on a dark bedroom window at night, a girl turning '
    'towards him, flat shapes, night colours"}'
)
#: the same reply without its image prompt
MISSING_T2I_REPLY = (
    '{"text": "Pip tapped on the glass and told Lena the moon had tumbled into the pond.", '
    '"quote": "Hurry, Lena, the moon fell into the pond!"}'
)
SPEECH_REPLY = "".join(f"<|speech_{u}|>" for u in (3, 17, 5, 29, 11, 8, 20, 1))

CONFIGURATION_SOURCE = '''\
"""Test stand-in for EMOVA's configuration_emova.py."""

from transformers import PretrainedConfig, Qwen2Config


class EMOVAConfig(PretrainedConfig):
    model_type = "emova"

    def __init__(self, text_config=None, image_token_index=0, patch_size=4, image_size=8,
                 script_image=(), script_text=(), script_bias=60.0, **kwargs):
        if isinstance(text_config, dict):
            text_config = Qwen2Config(**text_config)
        self.text_config = text_config if text_config is not None else Qwen2Config()
        self.image_token_index = image_token_index
        self.patch_size = patch_size
        self.image_size = image_size
        self.script_image = list(script_image)
        self.script_text = list(script_text)
        self.script_bias = script_bias
        super().__init__(**kwargs)

    def to_dict(self):
        out = super().to_dict()
        out["text_config"] = self.text_config.to_dict()
        return out
'''

MODELING_SOURCE = '''\
"""Test stand-in for EMOVA's modeling_emova.py: a tiny Qwen2 decoder with an image projection.

The logits get a bias towards the config's script (the reply for prompts with an image, another
for text-only prompts, then EOS): the tests choose what the model says.
"""

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel, Qwen2ForCausalLM
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_emova import EMOVAConfig


class EMOVAForConditionalGeneration(PreTrainedModel, GenerationMixin):
    config_class = EMOVAConfig
    base_model_prefix = "emova"
    main_input_name = "input_ids"
    _supports_sdpa = True
    _no_split_modules = []

    def __init__(self, config):
        super().__init__(config)
        self.language_model = Qwen2ForCausalLM(config.text_config)
        patch = 3 * config.patch_size * config.patch_size
        self.vision_proj = nn.Linear(patch, config.text_config.hidden_size)
        self.prompt_length = None
        self.post_init()

    def get_input_embeddings(self):
        return self.language_model.get_input_embeddings()

    def _embed(self, input_ids, pixel_values):
        embeds = self.get_input_embeddings()(input_ids)
        if pixel_values is not None:
            positions = (input_ids == self.config.image_token_index).nonzero()
            features = self.vision_proj(pixel_values.to(embeds.dtype))
            if len(positions) != features.shape[0] * input_ids.shape[0]:
                raise ValueError("image tokens and image patches do not match")
            embeds = embeds.clone()
            for k, (row, col) in enumerate(positions.tolist()):
                embeds[row, col] = features[k % features.shape[0]]
        return embeds

    def forward(self, input_ids=None, attention_mask=None, pixel_values=None, **kwargs):
        embeds = self._embed(input_ids, pixel_values)
        out = self.language_model(inputs_embeds=embeds, attention_mask=attention_mask,
                                  use_cache=False)
        logits = out.logits.float()
        if self.prompt_length is not None:
            script = self.config.script_image if pixel_values is not None else (
                self.config.script_text)
            step = input_ids.shape[1] - self.prompt_length
            target = script[step] if step < len(script) else self.config.text_config.eos_token_id
            logits[:, -1, target] += self.config.script_bias
        return CausalLMOutputWithPast(logits=logits)

    def prepare_inputs_for_generation(self, input_ids, attention_mask=None, pixel_values=None,
                                      **kwargs):
        # no cache: every step sees the whole sequence (and the image)
        return {"input_ids": input_ids, "attention_mask": attention_mask,
                "pixel_values": pixel_values}

    def _update_model_kwargs_for_generation(self, outputs, model_kwargs, **kwargs):
        mask = model_kwargs.get("attention_mask")
        if mask is not None:
            model_kwargs["attention_mask"] = torch.cat([mask, mask.new_ones((mask.shape[0], 1))],
                                                       dim=-1)
        return model_kwargs

    @torch.no_grad()
    def generate(self, input_ids=None, attention_mask=None, pixel_values=None, **kwargs):
        """Like EMOVA's: returns the prompt followed by the new tokens."""
        self.prompt_length = input_ids.shape[1]
        try:
            return super().generate(input_ids=input_ids, attention_mask=attention_mask,
                                    pixel_values=pixel_values, use_cache=False, **kwargs)
        finally:
            self.prompt_length = None
'''

PROCESSING_SOURCE = r'''\
"""Test stand-in for EMOVA's processing_emova.py (chat template, image patches, speech output)."""

import os
import re

import numpy as np
import torch
from transformers import BatchFeature, ProcessorMixin

SPEECH_UNIT = re.compile(r"<\|speech_(\d+)\|>")


class EMOVAProcessor(ProcessorMixin):
    attributes = ["tokenizer"]
    tokenizer_class = "AutoTokenizer"

    def __init__(self, tokenizer=None, image_size=8, patch_size=4, **kwargs):
        super().__init__(tokenizer, **kwargs)
        self.image_size = image_size
        self.patch_size = patch_size
        self.speech_tokenizer = None

    def set_speech_tokenizer(self, speech_tokenizer):
        self.speech_tokenizer = speech_tokenizer

    def apply_chat_template(self, conversation, add_generation_prompt=True, tokenize=False,
                            **kwargs):
        text = ""
        for message in conversation:
            parts = message["content"]
            if isinstance(parts, str):
                parts = [{"type": "text", "text": parts}]
            body = "".join("<image>" if p["type"] == "image" else p["text"] for p in parts)
            text += f"<|im_start|>{message['role']}\n{body}<|im_end|>\n"
        if add_generation_prompt:
            text += "<|im_start|>assistant\n"
        return text

    def _patches(self, image):
        size, patch = self.image_size, self.patch_size
        pixels = np.asarray(image.convert("RGB").resize((size, size)), dtype=np.float32) / 255.0
        grid = size // patch
        pixels = pixels.reshape(grid, patch, grid, patch, 3).transpose(0, 2, 1, 3, 4)
        return torch.from_numpy(pixels.reshape(grid * grid, -1).copy())

    def __call__(self, text=None, images=None, return_tensors=None, **kwargs):
        if isinstance(text, list) and text and isinstance(text[0], dict):
            text = self.apply_chat_template(text, add_generation_prompt=True)
        data = {}
        if images is not None:
            patches = self._patches(images)
            text = text.replace("<image>", "<image>" * patches.shape[0])
            data["pixel_values"] = patches
        encoded = self.tokenizer([text], return_tensors="pt")
        data["input_ids"] = encoded["input_ids"]
        data["attention_mask"] = encoded["attention_mask"]
        return BatchFeature(data=data, tensor_type=None)

    def batch_decode(self, sequences, skip_special_tokens=True, speaker=None,
                     output_wav_prefix=None, **kwargs):
        texts = self.tokenizer.batch_decode(sequences, skip_special_tokens=skip_special_tokens)
        if output_wav_prefix is None:
            return texts
        gender = (speaker or "female").lower()
        condition = f"gender-{gender}_emotion-neutral_speed-normal_pitch-normal"
        results = []
        for index, ids in enumerate(sequences):
            raw = self.tokenizer.decode(ids, skip_special_tokens=False)
            units = SPEECH_UNIT.findall(raw)
            if not units:
                results.append(texts[index])
                continue
            path = f"{output_wav_prefix}_{index}.wav"
            self.speech_tokenizer.decode(" ".join(units), condition=condition,
                                         output_wav_file=path)
            results.append(path)
        return results
'''

SPEECH_CONFIGURATION_SOURCE = '''\
"""Test stand-in for the EMOVA speech tokenizer's configuration."""

from transformers import PretrainedConfig


class EMOVASpeechTokenizerConfig(PretrainedConfig):
    model_type = "emova_speech_tokenizer"

    def __init__(self, num_units=32, samples_per_unit=64, sampling_rate=22050,
                 speakers=("female", "male"), **kwargs):
        self.num_units = num_units
        self.samples_per_unit = samples_per_unit
        self.sampling_rate = sampling_rate
        self.speakers = list(speakers)
        super().__init__(**kwargs)
'''

SPEECH_MODELING_SOURCE = r'''\
"""Test stand-in for the EMOVA speech tokenizer: units -> waveform through a tiny table."""

import re

import numpy as np
import torch
from scipy.io.wavfile import write
from torch import nn
from transformers import PreTrainedModel

from .configuration_speech_tokenizer import EMOVASpeechTokenizerConfig

CONDITION = re.compile(r"^gender-(\w+)_emotion-(\w+)_speed-(\w+)_pitch-(\w+)$")


class EMOVASpeechTokenizer(PreTrainedModel):
    config_class = EMOVASpeechTokenizerConfig
    base_model_prefix = "speech_tokenizer"
    main_input_name = "units"

    def __init__(self, config):
        super().__init__(config)
        self.units = nn.Embedding(config.num_units, config.samples_per_unit)
        self.style = nn.Embedding(len(config.speakers), config.samples_per_unit)
        self.post_init()

    def decode(self, units, condition=None, output_wav_file="output.wav"):
        match = CONDITION.match(condition or "")
        if match is None or match.group(1) not in self.config.speakers:
            raise ValueError(f"unknown condition {condition!r}")
        ids = torch.tensor([int(u) for u in units.split()], device=self.device)
        if ids.numel() == 0 or int(ids.max()) >= self.config.num_units:
            raise ValueError("speech units out of range")
        style = self.style.weight[self.config.speakers.index(match.group(1))]
        with torch.no_grad():
            audio = (0.5 * torch.tanh(25.0 * (self.units(ids) + style))).reshape(-1).cpu().numpy()
        write(output_wav_file, self.config.sampling_rate, audio.astype(np.float32))
        return audio
'''


def _chat_tokenizer(extra_tokens: list[str], speech_units: int):
    """Byte-level BPE (no merges) + Qwen-style special tokens + speech units + whole-chunk tokens
    for the scripted replies (so the scripted JSON is a few tokens, none repeated)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
        vocab.setdefault(char, len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    units = [f"<|speech_{u}|>" for u in range(speech_units)]
    tok.add_tokens([AddedToken(t, normalized=False) for t in units + extra_tokens])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        bos_token=None,
        model_max_length=4096,
    )


def reply_chunks(reply: str) -> list[str]:
    """A JSON reply cut after each ``", "`` (every chunk becomes one token)."""
    pieces = reply.split('", "')
    return [p + '", "' for p in pieces[:-1]] + [pieces[-1]]


def build_tiny_emova(
    path: Path, *, image_reply: str = GOOD_REPLY, text_reply: str = SPEECH_REPLY, seed: int = 0
) -> Path:
    """A tiny EMOVA-shaped checkpoint that answers ``image_reply`` to prompts with an image and
    ``text_reply`` to text-only prompts (then EOS)."""
    import torch
    from transformers import Qwen2Config

    torch.manual_seed(seed)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    chunks = [
        c for reply in (GOOD_REPLY, MISSING_T2I_REPLY, image_reply) for c in reply_chunks(reply)
    ]
    extra = list(dict.fromkeys(chunks + ["hello", " world"]))
    tokenizer = _chat_tokenizer(extra, TINY_SPEECH_UNITS)

    def script(reply: str) -> list[int]:
        ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == reply, reply
        return ids

    (path / "configuration_emova.py").write_text(CONFIGURATION_SOURCE)
    (path / "modeling_emova.py").write_text(MODELING_SOURCE)
    (path / "processing_emova.py").write_text(PROCESSING_SOURCE)
    namespace: dict = {}
    exec(compile(CONFIGURATION_SOURCE, "configuration_emova.py", "exec"), namespace)  # noqa: S102
    text_config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=4096,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = namespace["EMOVAConfig"](
        text_config=text_config,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        script_image=script(image_reply),
        script_text=script(text_reply),
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        architectures=["EMOVAForConditionalGeneration"],
        auto_map={
            "AutoConfig": "configuration_emova.EMOVAConfig",
            "AutoModel": "modeling_emova.EMOVAForConditionalGeneration",
        },
    )
    model = _load_model_class(path)(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    processor_config = {
        "processor_class": "EMOVAProcessor",
        "image_size": 8,
        "patch_size": 4,
        "auto_map": {"AutoProcessor": "processing_emova.EMOVAProcessor"},
    }
    (path / "processor_config.json").write_text(json.dumps(processor_config, indent=2))
    return path


def _load_model_class(path: Path):
    """The stand-in model class, imported the way Hugging Face imports remote code."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    return get_class_from_dynamic_module("modeling_emova.EMOVAForConditionalGeneration", str(path))


def build_tiny_speech_tokenizer(
    path: Path, *, num_units: int = TINY_SPEECH_UNITS, seed: int = 0
) -> Path:
    """A tiny speech-tokenizer checkpoint: ``decode`` writes a float32 wav at 22,050 Hz (and
    raises on units >= ``num_units``)."""
    import torch
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    torch.manual_seed(seed)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "configuration_speech_tokenizer.py").write_text(SPEECH_CONFIGURATION_SOURCE)
    (path / "modeling_speech_tokenizer.py").write_text(SPEECH_MODELING_SOURCE)
    config_cls = get_class_from_dynamic_module(
        "configuration_speech_tokenizer.EMOVASpeechTokenizerConfig", str(path)
    )
    model_cls = get_class_from_dynamic_module(
        "modeling_speech_tokenizer.EMOVASpeechTokenizer", str(path)
    )
    config = config_cls(
        num_units=num_units,
        sampling_rate=SAMPLING_RATE,
        architectures=["EMOVASpeechTokenizer"],
        auto_map={
            "AutoConfig": "configuration_speech_tokenizer.EMOVASpeechTokenizerConfig",
            "AutoModel": "modeling_speech_tokenizer.EMOVASpeechTokenizer",
        },
    )
    model_cls(config).save_pretrained(path)
    return path
