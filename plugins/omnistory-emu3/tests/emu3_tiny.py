"""Tiny native Emu3 checkpoints built offline: a byte-level BPE tokenizer with Emu3's special and
visual tokens (the ``tokenizers`` library), ``Emu3ImageProcessor`` sized for a handful of image
tokens, and a random ``Emu3ForConditionalGeneration`` (2 layers, hidden 32, a 32-code VQ-VAE with
the 8x spatial factor the processor assumes).  ``save_pretrained`` layout, as on the hub."""

from __future__ import annotations

from pathlib import Path

#: special tokens of the Emu3 vocabulary the processor and the modeling code look up by name
BOS, EOS, PAD = "<|extra_203|>", "<|extra_204|>", "<|endoftext|>"
IMAGE, BOI, EOI = "<image>", "<|image start|>", "<|image end|>"
WRAPPER, EOF, EOL = "<|image token|>", "<|extra_201|>", "<|extra_200|>"
CODEBOOK = 32
#: 32 x 32 pixels = 4 x 4 image tokens: 23 generated tokens per image
TINY_IMAGE_AREA = 32 * 32
VISUAL = [f"<|visual token {i:06d}|>" for i in range(CODEBOOK)]

#: Emu3's chat layout: the system text, then "USER: " + images + text, then "ASSISTANT:"
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] != 'system' %}{{ message['role'].upper() + ': ' }}{% endif %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}"
    "{{ '<image>' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{{ content['text'] + ' ' }}{% endfor %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)

CORPUS = [
    "You are a helpful assistant. USER: ASSISTANT:",
    '{"text": "Pip ran to the hill.", "t2i": "a small fox at a window", "quote": "Come quick!"}',
    "The moon fell behind Tall Hill. Lena looked out of her bedroom window at night.",
    "Scene: Narrative goal: Ambient mood: Character states: feeling story title style",
    "0123456789*,.:;!?'\"{}[]()- masterpiece, film grained, best quality.",
]


VOCAB_SIZE = 1200


def corpus() -> list[str]:
    """Text the tiny BPE is trained on: a few phrases, the plugin's prompt texts and the demo's
    stories, so that the understanding prompt is a few hundred tokens rather than ~1,000 bytes."""
    from omnistory_emu3 import prompting
    from omnistory_testkit import demo_examples

    texts = [*CORPUS, prompting.INSTRUCTIONS, prompting.SUMMARY]
    for example in demo_examples():
        texts.append(
            prompting.chat_prompt(example.metadata, example.current.text, example.conditions)
        )
    return texts


def build_tokenizer():
    from omnistory_testkit.checkpoints import tiny_tokenizer

    return tiny_tokenizer(
        corpus(),
        vocab_size=VOCAB_SIZE,
        special_tokens=[PAD, BOS, EOS, IMAGE, BOI, EOI, WRAPPER, EOF, EOL, *VISUAL],
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        padding_side="left",
        extra_special_tokens={
            "image_token": IMAGE,
            "boi_token": BOI,
            "eoi_token": EOI,
            "image_wrapper_token": WRAPPER,
            "eof_token": EOF,
        },
    )


def build_processor():
    from transformers import Emu3ImageProcessor, Emu3Processor

    image_processor = Emu3ImageProcessor(min_pixels=32 * 32, max_pixels=32 * 32, spatial_factor=8)
    return Emu3Processor(image_processor, build_tokenizer(), chat_template=CHAT_TEMPLATE)


def build_config(tokenizer, image_area: int | None = None):
    from transformers import Emu3Config

    vocab = tokenizer.get_vocab()
    text_config = {
        "vocab_size": len(vocab),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 2048,
        "attention_dropout": 0.0,
        "pad_token_id": vocab[PAD],
        "bos_token_id": vocab[BOS],
        "eos_token_id": vocab[EOS],
    }
    vq_config = {
        "codebook_size": CODEBOOK,
        "embed_dim": 4,
        "latent_channels": 4,
        "temporal_downsample_factor": 1,
        "base_channels": 32,
        "channel_multiplier": [1, 1, 1, 1],  # 3 down blocks: the 8x factor Emu3Processor assumes
        "num_res_blocks": 1,
        "attn_resolutions": [],
        "hidden_size": 32,
    }
    config = Emu3Config(text_config=text_config, vq_config=vq_config, vocabulary_map=vocab)
    if image_area is not None:
        config.image_area = image_area
    return config


def build_tiny_emu3(path: Path, *, seed: int = 0, image_area: int | None = None) -> Path:
    """A random native Emu3 checkpoint (model + processor) saved into ``path``."""
    import torch
    from transformers import Emu3ForConditionalGeneration

    torch.manual_seed(seed)
    processor = build_processor()
    model = Emu3ForConditionalGeneration(build_config(processor.tokenizer, image_area)).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


#: what the trained tiny Chat checkpoint answers: valid JSON whose quote is not in the text
ANSWER = (
    '{"text": "Pip ran to the hill.", "t2i": "a small fox at a window", "quote": "Come quick!"}'
)


def train_to_answer(
    chat_dir: Path,
    out_dir: Path,
    items: list[dict],
    answer: str = ANSWER,
    *,
    max_steps: int = 400,
    margin: float = 4.0,
) -> Path:
    """A copy of the tiny Chat checkpoint fitted to answer ``answer`` to the plugin's own
    understanding inputs for ``items`` (built by the plugin's loading path and prompt code), so
    the whole backbone can be exercised end to end on CPU.  Training stops once every answer token
    leads all others by ``margin`` logits (sampling at temperature 0.2 then reproduces it).
    Saved like any checkpoint."""
    import torch
    from omnistory_emu3.backbone import Emu3

    backbone = Emu3(chat_model=str(chat_dir), gen_model=str(chat_dir), device="cpu")
    backbone.load()
    engine = backbone.engine
    model, tokenizer = engine.chat_model, engine.chat_processor.tokenizer
    vocabulary = model.model.vocabulary_mapping
    target = tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    target = torch.tensor([target])
    sequences = []
    with torch.no_grad():
        for item in items:
            inputs = engine.chat_inputs(item["current_image"].open_image(), backbone.request(item))
            ids = inputs["input_ids"].clone()
            # the image placeholders hold the image's own BPE tokens: the embeddings the model's
            # forward scatters in for pixel_values, without re-encoding the image every step
            codes = model.model.get_image_tokens(inputs["pixel_values"], inputs["image_sizes"])
            ids[ids == vocabulary.image_token_id] = codes.to(ids.dtype)
            sequences.append((torch.cat([ids, target], dim=1), ids.shape[1]))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is several times faster than two
    try:
        torch.manual_seed(0)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        model.train()
        for _ in range(max_steps):
            losses, fitted = [], True
            for ids, start in sequences:
                labels = torch.full_like(ids, -100)
                labels[:, start:] = ids[:, start:]
                out = model(input_ids=ids, labels=labels)
                losses.append(out.loss)
                logits = out.logits[0, start - 1 : -1].detach()
                wanted = ids[0, start:, None]
                best = logits.gather(1, wanted)[:, 0]
                rivals = logits.scatter(1, wanted, float("-inf")).max(dim=1).values
                fitted = fitted and bool((best - rivals).min() >= margin)
            if fitted:
                break
            optimizer.zero_grad()
            sum(losses).backward()
            optimizer.step()
        else:
            raise RuntimeError(f"the tiny Chat model did not fit the answer in {max_steps} steps")
    finally:
        torch.set_num_threads(threads)
    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    engine.chat_processor.save_pretrained(out_dir)
    return out_dir


def demo_items(limit: int = 2) -> list[dict]:
    """What the engine hands the backbone for the first demo examples."""
    from omnistory_testkit import demo_items as engine_items

    return engine_items(limit)
