"""A tiny random GGUF written by the tests with the ``gguf`` package: a 2-layer ``qwen2`` model
(the architecture of the real Qwen2.5-Coder GGUFs) with a byte-level BPE vocabulary, Qwen's
special tokens and a ChatML chat template, float32 tensors.  Both backends load it through their
own GGUF readers.  Nothing here imports gguf or numpy at module import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
HIDDEN, HEADS, KV_HEADS, FFN, LAYERS, CONTEXT = 64, 4, 2, 128, 2, 8192


def build_tiny_gguf(path: Path, *, seed: int = 0) -> Path:
    """Write the tiny model to ``path`` and return it."""
    import gguf
    import numpy as np
    from omnistory_testkit.checkpoints import byte_bpe

    corpus = [
        "The moon fell behind the hill. Pip the fox ran to find it with Lena.",
        '{"narration": "text", "image_prompt": "a picture", "speech": {"utterance": "Come!",'
        ' "speaker": "Pip", "emotion": "happy", "speed": "fast", "pitch": "high", "gender":'
        ' "male"}}',
        "Book metadata, current page narration, conditions for the next page.",
    ]
    tokenizer = byte_bpe(corpus, vocab_size=420, special_tokens=SPECIALS)
    vocab = tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    assert [vocab[t] for t in tokens] == list(range(len(tokens)))
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]
    types = [gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t in tokens]

    writer = gguf.GGUFWriter(str(path), arch="qwen2")
    writer.add_name("tiny-random-qwen2")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(vocab["<|endoftext|>"])
    writer.add_eos_token_id(vocab["<|im_end|>"])
    writer.add_pad_token_id(vocab["<|endoftext|>"])
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    rng = np.random.default_rng(seed)
    head_dim = HIDDEN // HEADS

    def weight(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # numpy shapes are (out, in), as torch has them; gguf reverses them into ggml's order
    writer.add_tensor("token_embd.weight", weight(len(tokens), HIDDEN, scale=1.0))
    for i in range(LAYERS):
        b = f"blk.{i}."
        writer.add_tensor(b + "attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(b + "attn_q.weight", weight(HIDDEN, HIDDEN))
        writer.add_tensor(b + "attn_q.bias", weight(HIDDEN))
        writer.add_tensor(b + "attn_k.weight", weight(KV_HEADS * head_dim, HIDDEN))
        writer.add_tensor(b + "attn_k.bias", weight(KV_HEADS * head_dim))
        writer.add_tensor(b + "attn_v.weight", weight(KV_HEADS * head_dim, HIDDEN))
        writer.add_tensor(b + "attn_v.bias", weight(KV_HEADS * head_dim))
        writer.add_tensor(b + "attn_output.weight", weight(HIDDEN, HIDDEN))
        writer.add_tensor(b + "ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        writer.add_tensor(b + "ffn_gate.weight", weight(FFN, HIDDEN))
        writer.add_tensor(b + "ffn_up.weight", weight(FFN, HIDDEN))
        writer.add_tensor(b + "ffn_down.weight", weight(HIDDEN, FFN))
    writer.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    # sharp logits: a different prompt or seed changes the sampled tokens
    writer.add_tensor("output.weight", weight(len(tokens), HIDDEN, scale=2.0))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def need(*modules: str, why: str) -> None:
    for module in modules:
        pytest.importorskip(module, reason=f"{module} is not installed: {why}")


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory) -> Path:
    need("gguf", "numpy", why="pip install './plugins/omnistory-llamacpp[test]'")
    return build_tiny_gguf(tmp_path_factory.mktemp("tiny-gguf") / "tiny-qwen2.gguf")
