"""A stand-in for the OpenMOSS/AnyGPT checkout, and tiny checkpoints for it.

AnyGPT's inference code is a git repository (and its weights are 7B + SEED + unCLIP + SoundStorm),
so the tests write a source tree with the module names, classes and call signatures the plugin uses
-- ``seed2.seed_llama_tokenizer.ImageTokenizer``, ``speechtokenizer.SpeechTokenizer`` (a PyPI
package upstream), ``soundstorm_speechtokenizer``, ``infer.voice_clone.load_soundstorm`` /
``semantic2acoustic``, ``m_utils.anything2token`` and ``m_utils.conversation`` -- and build tiny
checkpoints for it.  The plugin's own code then runs unchanged: the checkout on ``sys.path``, the
imports, every constructor and ``from_pretrained`` / ``load_from_checkpoint`` / ``torch.load`` call,
the chat template, the three ``generate`` calls and the decoding.

What the stand-ins do (they are not the models):

* ``ImageTokenizer`` encodes a 224 px image into 32 codes (the colour of each cell of a 4x8 grid,
  nearest entry of a 64-colour codebook loaded from ``seed_quantizer.pt``) and decodes 32 codes into
  a picture painted with those colours, its size read from the decoder directory; it raises on a
  run that does not hold exactly 32 codes;
* ``SoundStorm.generate`` keeps the semantic codes as the first level and draws the acoustic levels
  at random (like SoundStorm's sampling: the seed matters); it raises on an empty run;
  ``SpeechTokenizer.decode`` turns codes into tones at its configured sample rate;
* the chat model is a real ``LlamaForCausalLM`` whose weights make it a next-token table (one-hot
  embeddings, attention and MLP outputs zeroed, ``lm_head`` holding the table), with a
  ``LlamaTokenizer`` whose added tokens are AnyGPT's tags, media tokens and the scripted words
  (other characters than a space and a colon are dropped when a prompt is tokenized): it continues
  ``Narration:``, ``<soim>`` and ``<sosp>`` with the script it was built with.

Every stand-in call is appended to the module-level ``CALLS`` list of its module.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

#: SEED stand-in: codebook size and codes per image (upstream: 8192 codes, 32 per image)
IMAGE_CODES = 64
CODES_PER_IMAGE = 32
#: SpeechTokenizer stand-in: semantic codebook, quantizer levels, samples per code, sample rate
SPEECH_CODES = 32
SPEECH_LEVELS = 3
HOP = 320
SAMPLE_RATE = 16000
#: side of the pictures the unCLIP stand-in paints
DECODED_SIZE = 64

TEXT_ANSWER = (
    " Pip",
    " finds",
    " a",
    " red",
    " kite",
    " in",
    " the",
    " tall",
    " grass.",
    "\n",
    "Speech:",
    ' "Look',
    " what",
    " I",
    ' found!"',
)
IMAGE_ANSWER = tuple(range(10, 10 + CODES_PER_IMAGE))
SPEECH_ANSWER = tuple(range(3, 27))
SPECIAL = (
    "[Human]",
    "[MMGPT]",
    "<eoh>",
    "<eos>",
    "<eom>",
    "<soim>",
    "<eoim>",
    "<sosp>",
    "<eosp>",
    "<somu>",
    "<eomu>",
    "Narration:",
)

SOURCES: dict[str, str] = {
    "seed2/__init__.py": "",
    "seed2/seed_llama_tokenizer.py": '''
        """Stand-in for seed2.seed_llama_tokenizer (SEED tokenizer-2 + unCLIP decoder)."""
        import json
        import os

        import numpy as np
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from PIL import Image

        CALLS = []
        MEAN = np.array([0.48145466, 0.4578275, 0.40821073], dtype=np.float32)
        STD = np.array([0.26862954, 0.26130258, 0.27577711], dtype=np.float32)


        class _Processor:
            def __init__(self, size):
                self.size = size

            def __call__(self, image):
                image = image.convert("RGB").resize((self.size, self.size), Image.BICUBIC)
                array = (np.asarray(image, dtype=np.float32) / 255.0 - MEAN) / STD
                return torch.from_numpy(array.transpose(2, 0, 1).copy())


        class ImageTokenizer(nn.Module):
            def __init__(self, model_path, diffusion_model_path=None, load_diffusion=False,
                         image_size=224, device="cuda", fp16=True, **kwargs):
                super().__init__()
                state = torch.load(model_path, map_location="cpu")
                self.codebook = nn.Parameter(state["codebook"], requires_grad=False)
                self.decoded_size = None
                if diffusion_model_path is not None and load_diffusion:
                    with open(os.path.join(diffusion_model_path, "model_index.json")) as fh:
                        json.load(fh)
                    with open(os.path.join(diffusion_model_path, "decoder.json")) as fh:
                        self.decoded_size = int(json.load(fh)["size"])
                self.to(device)
                self.processor = _Processor(image_size)
                self.latents = torch.randn((1, 4, 8, 8), device=device)
                self.device, self.fp16, self.image_size = device, fp16, image_size
                CALLS.append(("init", {"model_path": model_path, "image_size": image_size,
                                       "diffusion_model_path": diffusion_model_path,
                                       "load_diffusion": load_diffusion, "fp16": fp16,
                                       "device": str(device)}))

            def encode(self, image_torch):
                if len(image_torch.shape) == 3:
                    image_torch = image_torch.unsqueeze(0)
                assert image_torch.shape[-2:] == (self.image_size, self.image_size)
                with torch.no_grad():
                    cells = F.adaptive_avg_pool2d(image_torch.float(), (4, 8)).flatten(2)
                    cells = cells.transpose(1, 2)
                    ids = torch.cdist(cells, self.codebook[None].float()).argmin(-1)
                CALLS.append(("encode", {"shape": tuple(image_torch.shape)}))
                return ids.view(image_torch.shape[0], -1)

            def decode(self, indices, negative_indices=None, guidance_scale=10,
                       num_inference_steps=20):
                CALLS.append(("decode", {"codes": indices.tolist(),
                                         "guidance_scale": guidance_scale,
                                         "num_inference_steps": num_inference_steps,
                                         "negative_indices": negative_indices}))
                if indices.shape[-1] != 32:
                    raise ValueError(f"SEED decodes 32 codes, got {indices.shape[-1]}")
                colours = self.codebook[indices[0].long()].float() * torch.tensor(STD)
                colours = ((colours + torch.tensor(MEAN)).clamp(0, 1) * 255).round()
                grid = colours.view(4, 8, 3).to(torch.uint8).numpy()
                image = Image.fromarray(grid, "RGB").resize(
                    (self.decoded_size, self.decoded_size), Image.NEAREST)
                return [image]
    ''',
    "speechtokenizer/__init__.py": "from .model import SpeechTokenizer\n",
    "speechtokenizer/model.py": '''
        """Stand-in for the speechtokenizer package (SpeechTokenizer)."""
        import json
        import math

        import torch
        import torch.nn as nn

        CALLS = []


        class SpeechTokenizer(nn.Module):
            def __init__(self, config):
                super().__init__()
                self.sample_rate = config["sample_rate"]
                self.n_q = config["n_q"]
                self.hop = config["hop"]
                self.loudness = nn.Parameter(torch.zeros(config["codebook_size"]),
                                             requires_grad=False)

            @classmethod
            def load_from_checkpoint(cls, config_path, ckpt_path):
                with open(config_path) as fh:
                    model = cls(json.load(fh))
                model.load_state_dict(torch.load(ckpt_path, map_location="cpu"))
                CALLS.append(("load", {"config": config_path, "ckpt": ckpt_path}))
                return model

            def decode(self, codes, st=0):
                q, b, t = codes.shape
                CALLS.append(("decode", {"shape": (q, b, t)}))
                semantic = codes[0].float()
                pitch = 220.0 + 20.0 * semantic + 5.0 * codes[1:].float().mean(0)
                time = torch.arange(self.hop, device=codes.device) / self.sample_rate
                level = 0.2 + 0.5 * torch.sigmoid(self.loudness[codes[0].long()])
                wave = level[..., None] * torch.sin(2 * math.pi * pitch[..., None] * time)
                return wave.reshape(b, 1, t * self.hop)
    ''',
    "soundstorm_speechtokenizer/__init__.py": (
        "from .soundstorm import ConformerWrapper, SoundStorm\n"
    ),
    "soundstorm_speechtokenizer/soundstorm.py": '''
        """Stand-in for soundstorm_speechtokenizer.soundstorm."""
        from pathlib import Path

        import torch
        import torch.nn as nn

        CALLS = []


        class ConformerWrapper(nn.Module):
            def __init__(self, codebook_size, num_quantizers, conformer=None, **kwargs):
                super().__init__()
                self.codebook_size = codebook_size
                self.num_quantizers = num_quantizers
                self.scale = nn.Parameter(torch.ones(()), requires_grad=False)


        class SoundStorm(nn.Module):
            def __init__(self, net, num_semantic_token_ids, semantic_pad_id=None, pad_id=None,
                         schedule="cosine", **kwargs):
                super().__init__()
                self.net = net
                self.num_quantizers = net.num_quantizers
                self.semantic_token_emb = nn.Embedding(num_semantic_token_ids + 1,
                                                       net.num_quantizers)

            def load(self, path, strict=True):
                assert Path(path).exists()
                self.load_state_dict(torch.load(str(path), map_location="cpu"), strict=strict)

            @torch.no_grad()
            def generate(self, semantic_tokens, prompt_tokens=None, steps=8,
                         num_full_sampling_levels=1, topk_pres=0.7, greedy=True,
                         is_cat_semantic_token=True):
                CALLS.append(("generate", {"steps": steps, "greedy": greedy,
                                           "prompt": prompt_tokens is not None,
                                           "codes": semantic_tokens.tolist()}))
                batch, length = semantic_tokens.shape
                if length == 0:
                    raise ValueError("no semantic tokens to complete")
                acoustic = torch.randint(0, self.net.codebook_size,
                                         (batch, length, self.num_quantizers - 1),
                                         device=semantic_tokens.device)
                return torch.cat([semantic_tokens.long()[..., None], acoustic], dim=-1)
    ''',
    "anygpt/src/__init__.py": "",
    "anygpt/src/infer/__init__.py": "",
    "anygpt/src/infer/voice_clone.py": '''
        """Stand-in for anygpt/src/infer/voice_clone.py."""
        from soundstorm_speechtokenizer import ConformerWrapper, SoundStorm
        from speechtokenizer import SpeechTokenizer  # noqa: F401 - as upstream


        def load_soundstorm(model_path):
            conformer = ConformerWrapper(codebook_size=16, num_quantizers=3,
                                         conformer={"dim": 8, "depth": 1, "heads": 1,
                                                    "dim_head": 8, "attn_flash": False})
            soundstorm = SoundStorm(net=conformer, num_semantic_token_ids=32,
                                    semantic_pad_id=32, pad_id=16, schedule="cosine")
            soundstorm.load(model_path)
            return soundstorm


        def semantic2acoustic(semantic_tokens, prompt_tokens, soundstorm, tokenizer, steps=1,
                              greedy=True):
            generated = soundstorm.generate(semantic_tokens=semantic_tokens,
                                            prompt_tokens=prompt_tokens, steps=steps,
                                            greedy=greedy)
            return tokenizer.decode(generated.permute(2, 0, 1))
    ''',
    "anygpt/src/m_utils/__init__.py": "",
    "anygpt/src/m_utils/anything2token.py": '''
        """Stand-in for m_utils.anything2token: AnyGPT's media tags and token strings."""
        image_prefix = "\\U0001F440"
        speech_prefix = "\\U0001F5E3\\uFE0F"
        music_prefix = "\\U0001F3B6"
        start_of_image, end_of_image = "<soim>", "<eoim>"
        start_of_speech, end_of_speech = "<sosp>", "<eosp>"
        start_of_music, end_of_music = "<somu>", "<eomu>"
        modal_special_str = {
            "image": {"prefix": image_prefix, "sos": start_of_image, "eos": end_of_image},
            "speech": {"prefix": speech_prefix, "sos": start_of_speech, "eos": end_of_speech},
            "music": {"prefix": music_prefix, "sos": start_of_music, "eos": end_of_music},
        }


        def modality_tokens_to_string(tokens, modality="image"):
            tags = modal_special_str[modality]
            body = "".join(f"<{tags['prefix']}{token}>" for token in tokens)
            return tags["sos"] + body + tags["eos"]
    ''',
    "anygpt/src/m_utils/conversation.py": '''
        """Stand-in for m_utils.conversation: the MMGPT chat template."""
        import copy

        from .anything2token import start_of_image, start_of_music, start_of_speech


        class Conversation:
            def __init__(self, name, system_message, roles, sep, sep2):
                self.name, self.system_message, self.roles = name, system_message, roles
                self.sep, self.sep2, self.messages = sep, sep2, []

            def append_message(self, role, message):
                self.messages.append([role, message])

            def get_prompt(self, force_image_generation=False, force_speech_generation=False,
                           force_music_generation=False, force_res_prefix=None):
                text = self.system_message + "\\n"
                for index, (role, message) in enumerate(self.messages):
                    if index % 2 == 0:
                        text += role + ": " + message + self.sep + "\\n"
                    else:
                        text += role + ": " + message + self.sep2 + "\\n"
                if self.messages[-1][0] == self.roles[0]:
                    text += self.roles[1] + ":"
                    if force_res_prefix is not None:
                        text += " " + force_res_prefix
                    if force_image_generation:
                        text += " " + start_of_image
                    elif force_speech_generation:
                        text += " " + start_of_speech
                    elif force_music_generation:
                        text += " " + start_of_music
                return text

            def copy(self):
                return copy.deepcopy(self)


        conv_templates = {
            "MMGPT": Conversation("MMGPT", "You are a stand-in assistant.", ("[Human]", "[MMGPT]"),
                                  "<eoh>", "<eos>"),
        }


        def get_conv_template(name):
            return conv_templates[name].copy()
    ''',
}


def write_source_tree(root: Path) -> Path:
    """The stand-in checkout at ``root``."""
    for relative, text in SOURCES.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return root


def image_token(code: int) -> str:
    return f"<\U0001f440{code}>"


def speech_token(code: int) -> str:
    return f"<\U0001f5e3\ufe0f{code}>"


def chain(*tokens: str) -> dict[str, str]:
    return dict(zip(tokens[:-1], tokens[1:], strict=True))


def script(*, image: str = "ok", speech: str = "ok") -> dict[str, str]:
    """The chat model's next-token table.  ``image`` / ``speech``: ``ok`` (a complete run),
    ``unclosed`` (no end tag: the modality is missing) or ``empty`` (an empty run: decoding
    raises)."""
    table = chain("Narration:", *TEXT_ANSWER, "<eos>")
    runs = {
        "image": ("<soim>", "<eoim>", [image_token(c) for c in IMAGE_ANSWER], image),
        "speech": ("<sosp>", "<eosp>", [speech_token(c) for c in SPEECH_ANSWER], speech),
    }
    for start, end, body, how in runs.values():
        if how == "ok":
            table.update(chain(start, *body, end, "<eos>"))
        elif how == "unclosed":
            table.update(chain(start, *body, "<eos>"))
        elif how == "empty":
            table.update(chain(start, end, "<eos>"))
        else:
            raise ValueError(how)
    table["<eos>"] = "</s>"
    return table


def build_tokenizer():
    from transformers import LlamaTokenizer

    # besides the added tokens the vocabulary holds only a space and a colon: every other
    # character of a prompt is dropped, which keeps the prompts short (the table model looks at
    # the last token only)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, ":": 4}
    tokenizer = LlamaTokenizer(vocab=vocab, merges=[], legacy=True)
    added = [
        *SPECIAL,
        *(image_token(c) for c in range(IMAGE_CODES)),
        *(speech_token(c) for c in range(SPEECH_CODES)),
        *TEXT_ANSWER,
    ]
    tokenizer.add_tokens(list(dict.fromkeys(added)))
    return tokenizer


def build_chat_model(path: Path, table: dict[str, str], *, strength: float = 3.0) -> Path:
    """A ``LlamaForCausalLM`` that continues every token with ``table[token]`` (``</s>`` when the
    table has no entry) and its tokenizer, saved with ``save_pretrained``."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    vocab = len(tokenizer)
    hidden = vocab + vocab % 2
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=8,
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        max_position_embeddings=8192,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    ids = tokenizer.convert_tokens_to_ids
    end = ids("</s>")
    with torch.no_grad():
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, :vocab] = torch.eye(vocab)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        head = torch.zeros(vocab, hidden)
        for token in range(vocab):
            head[end, token] = strength
        for token, successor in table.items():
            head[:, ids(token)] = 0.0
            head[ids(successor), ids(token)] = strength
        model.lm_head.weight.copy_(head)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_image_tokenizer(path: Path) -> Path:
    """``seed_quantizer.pt``: a 64-colour codebook in the processor's normalised space."""
    import torch

    generator = torch.Generator().manual_seed(1)
    path.mkdir(parents=True, exist_ok=True)
    torch.save(
        {"codebook": torch.randn(IMAGE_CODES, 3, generator=generator) * 1.5},
        path / "seed_quantizer.pt",
    )
    return path


def build_image_decoder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "model_index.json").write_text(
        json.dumps({"_class_name": "StableUnCLIPImg2ImgPipeline"}), encoding="utf-8"
    )
    (path / "decoder.json").write_text(json.dumps({"size": DECODED_SIZE}), encoding="utf-8")
    return path


def build_speech_modules(path: Path) -> Path:
    """``speechtokenizer/{config.json,ckpt.dev}`` and ``soundstorm/..._mls.pt``."""
    import torch

    generator = torch.Generator().manual_seed(2)
    (path / "speechtokenizer").mkdir(parents=True, exist_ok=True)
    (path / "soundstorm").mkdir(parents=True, exist_ok=True)
    config = {
        "sample_rate": SAMPLE_RATE,
        "n_q": SPEECH_LEVELS,
        "hop": HOP,
        "codebook_size": SPEECH_CODES,
    }
    (path / "speechtokenizer" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    torch.save(
        {"loudness": torch.randn(SPEECH_CODES, generator=generator)},
        path / "speechtokenizer" / "ckpt.dev",
    )
    torch.save(
        {
            "net.scale": torch.ones(()),
            "semantic_token_emb.weight": torch.randn(
                SPEECH_CODES + 1, SPEECH_LEVELS, generator=generator
            ),
        },
        path / "soundstorm" / "speechtokenizer_soundstorm_mls.pt",
    )
    return path


def build_all(root: Path) -> dict[str, Path]:
    """The stand-in checkout and every checkpoint except the chat model."""
    return {
        "source_dir": write_source_tree(root / "AnyGPT"),
        "image_tokenizer": build_image_tokenizer(root / "seed-tokenizer-2"),
        "image_decoder": build_image_decoder(root / "unclip"),
        "speech_modules": build_speech_modules(root / "speech-modules"),
    }
