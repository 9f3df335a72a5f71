"""A tiny Qwen2.5-Omni checkpoint built offline, in the layout of ``Qwen/Qwen2.5-Omni-7B``.

* config: ``Qwen2_5OmniConfig`` with tiny thinker (1-layer text model, vision and audio encoders),
  talker and token2wav (DiT + BigVGAN) sub-configs -> ``save_pretrained``;
* ``spk_dict.pt`` with the two speakers ``from_pretrained`` requires;
* a byte-level BPE tokenizer trained here with the ``tokenizers`` library, with the special tokens
  the chat template and the model use (``<|im_start|>``, ``<|IMAGE|>``, ``<|AUDIO|>``,
  ``<tts_text_bos>`` ...) and the multimodal token attributes the processor reads;
* ``preprocessor_config.json`` holding the image processor and the feature extractor together,
  and ``chat_template.jinja`` rendering the Qwen format (``<|vision_bos|><|IMAGE|><|vision_eos|>``).

The weights are random except for the thinker, which is wired as a bigram model so that its replies
are known: attention and MLP outputs are zero, so each position's logits depend only on its token;
after ``\\n`` (the end of ``<|im_start|>assistant\\n``) it emits one added token whose text is
:data:`REPLY`, then ``<|im_end|>``.  :func:`with_reply` copies a checkpoint with another reply text
for that token, without touching the weights.  Talker and token2wav are random: the speech is noise
of the right shape and rate.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

QUOTE = "The moon fell behind the hill!"
NARRATION = f'Pip tapped the glass. "{QUOTE}" he whispered.'
IMAGE_PROMPT = "A small orange fox taps on a bedroom window at night"
#: pass 1 takes the first line as the quote, pass 2 finds the JSON object by the brace slice
REPLY = f'"{QUOTE}"\n' + json.dumps({"text": NARRATION, "t2i": IMAGE_PROMPT})

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|AUDIO|>",
    "<|audio_bos|>",
    "<|audio_eos|>",
    "<|IMAGE|>",
    "<|vision_bos|>",
    "<|vision_eos|>",
    "<|VIDEO|>",
    "<tts_pad>",
    "<tts_text_bos>",
    "<tts_text_eod>",
    "<tts_text_bos_single>",
]
MULTIMODAL_TOKENS = {
    "image_token": "<|IMAGE|>",
    "audio_token": "<|AUDIO|>",
    "video_token": "<|VIDEO|>",
    "vision_bos_token": "<|vision_bos|>",
    "vision_eos_token": "<|vision_eos|>",
    "audio_bos_token": "<|audio_bos|>",
    "audio_eos_token": "<|audio_eos|>",
}
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] == 'image' %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif part['type'] == 'audio' %}<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    "Book metadata: genre, topic, style, characters. Current page text. Next page condition: "
    "scene, characters, emotion, action, ambient sound. Write only the words one character speaks.",
    "The moon fell behind the hill! Pip the fox tapped on the glass and Lena looked out of her "
    "window. The line of dialogue as text. Answer with a JSON object with two keys.",
]
HIDDEN = 32
MEL = 16
#: mel bins of the tiny audio encoder / feature extractor
MEL_BINS = 16


def _tokenizer(reply: str):
    from omnistory_testkit.checkpoints import byte_bpe
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast

    tok = byte_bpe(CORPUS, vocab_size=400, special_tokens=SPECIAL_TOKENS)
    tok.add_tokens([AddedToken(reply, special=False, normalized=False)])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=dict(MULTIMODAL_TOKENS),
    )


def _preprocessor_config() -> dict:
    from transformers import WhisperFeatureExtractor

    try:
        from transformers import Qwen2VLImageProcessorPil as ImageProcessor
    except ImportError:  # transformers 4.x: the slow processor is the PIL one
        from transformers import Qwen2VLImageProcessor as ImageProcessor
    # 2 x 2 merged patches of 14 px per image; 4 s of audio per feature window
    images = ImageProcessor(
        min_pixels=4 * 28 * 28,
        max_pixels=4 * 28 * 28,
        patch_size=14,
        merge_size=2,
        temporal_patch_size=2,
    )
    audio = WhisperFeatureExtractor(
        feature_size=MEL_BINS, chunk_length=4, return_attention_mask=True
    )
    config = {**audio.to_dict(), **images.to_dict(), "processor_class": "Qwen2_5OmniProcessor"}
    config.pop("mel_filters", None)
    config["image_processor_type"] = "Qwen2VLImageProcessor"
    return config


def build_tiny_qwen25omni(out: Path, reply: str = REPLY) -> Path:
    """Write the checkpoint to ``out`` (see the module docstring) and return ``out``."""
    import torch
    from transformers import (
        GenerationConfig,
        Qwen2_5OmniConfig,
        Qwen2_5OmniForConditionalGeneration,
    )

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer(reply)
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    (out / "preprocessor_config.json").write_text(
        json.dumps(_preprocessor_config(), indent=2), encoding="utf-8"
    )
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    reply_id = tokenizer.convert_tokens_to_ids(reply)
    trigger = tokenizer("assistant\n", add_special_tokens=False)["input_ids"][-1]
    mrope = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 1, 1]}
    media_ids = dict(
        audio_token_index=ids["<|AUDIO|>"],
        image_token_index=ids["<|IMAGE|>"],
        video_token_index=ids["<|VIDEO|>"],
        audio_start_token_id=ids["<|audio_bos|>"],
        audio_end_token_id=ids["<|audio_eos|>"],
        vision_start_token_id=ids["<|vision_bos|>"],
    )
    thinker = dict(
        text_config=dict(
            vocab_size=len(tokenizer),
            hidden_size=HIDDEN,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=8192,
            rope_parameters=mrope,
            tie_word_embeddings=False,
            eos_token_id=ids["<|im_end|>"],
            pad_token_id=ids["<|endoftext|>"],
        ),
        vision_config=dict(
            depth=1,
            hidden_size=HIDDEN,
            intermediate_size=64,
            num_heads=4,
            out_hidden_size=HIDDEN,
            fullatt_block_indexes=[0],
            window_size=112,
            patch_size=14,
            spatial_merge_size=2,
            temporal_patch_size=2,
        ),
        audio_config=dict(
            num_mel_bins=MEL_BINS,
            encoder_layers=1,
            encoder_attention_heads=4,
            encoder_ffn_dim=64,
            d_model=HIDDEN,
            output_dim=HIDDEN,
            max_source_positions=1500,
            n_window=100,
        ),
        **media_ids,
    )
    talker = dict(
        vocab_size=8448,
        embedding_size=HIDDEN,
        hidden_size=HIDDEN,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        rope_parameters=mrope,
        vision_end_token_id=ids["<|vision_eos|>"],
        tts_text_start_token_id=ids["<tts_text_bos>"],
        tts_text_end_token_id=ids["<tts_text_eod>"],
        tts_text_pad_token_id=ids["<tts_pad>"],
        **media_ids,
    )
    token2wav = dict(
        dit_config=dict(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            head_dim=16,
            ff_mult=2,
            emb_dim=16,
            mel_dim=MEL,
            enc_emb_dim=16,
            enc_dim=16,
            # one SE-Res2Net block; the aggregation layer takes its 16 channels
            enc_channels=[16, 16, 16],
            enc_kernel_sizes=[5, 3, 1],
            enc_dilations=[1, 2, 1],
            enc_attention_channels=8,
            enc_res2net_scale=2,
            enc_se_channels=8,
            num_embeds=8448,
            repeats=2,
            block_size=24,
            look_ahead_layers=[1],
            look_backward_layers=[0],
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        ),
        # 3 upsampling stages of 8 x 6 x 5 = 240 samples per mel frame (as the real 5x3x2x2x2x2)
        bigvgan_config=dict(
            mel_dim=MEL,
            upsample_initial_channel=32,
            resblock_kernel_sizes=[3],
            resblock_dilation_sizes=[[1, 3, 5]],
            upsample_rates=[8, 6, 5],
            upsample_kernel_sizes=[16, 12, 10],
        ),
    )
    config = Qwen2_5OmniConfig(
        thinker_config=thinker, talker_config=talker, token2wav_config=token2wav
    )
    torch.manual_seed(0)
    model = Qwen2_5OmniForConditionalGeneration(config)
    thinker_model = model.thinker
    text_model = getattr(thinker_model.model, "language_model", thinker_model.model)
    with torch.no_grad():
        for layer in text_model.layers:  # residual stream = the token's own embedding
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        embed = thinker_model.get_input_embeddings().weight
        embed[:, :2] = 0.0
        embed[trigger] = 0.0
        embed[trigger, 0] = 1.0
        embed[reply_id] = 0.0
        embed[reply_id, 1] = 1.0
        head = thinker_model.lm_head.weight
        head.zero_()
        head[reply_id, 0] = 10.0  # after "\n": the reply token
        head[ids["<|im_end|>"], 1] = 10.0  # after the reply: end of turn
    model.save_pretrained(out)
    GenerationConfig(
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]], pad_token_id=ids["<|endoftext|>"]
    ).save_pretrained(out)
    speakers = {
        name: {
            "bos_token": ids["<tts_text_bos_single>"],
            "cond": torch.randn(1, 16),
            "ref_mel": torch.randn(1, 8, MEL),
        }
        for name in ("Chelsie", "Ethan")
    }
    torch.save(speakers, out / "spk_dict.pt")
    return out


def with_reply(base: Path, out: Path, reply: str) -> Path:
    """A copy of ``base`` whose scripted reply token reads ``reply`` (same weights and ids)."""
    base, out = Path(base), Path(out)
    shutil.copytree(base, out)
    path = out / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    entry = next(t for t in data["added_tokens"] if not t["special"])
    entry["content"] = reply
    path.write_text(json.dumps(data), encoding="utf-8")
    return out
