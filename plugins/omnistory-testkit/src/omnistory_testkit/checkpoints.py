"""Pieces every tiny random checkpoint built inside a test needs.

A plugin's loading path is tested on a checkpoint the test builds: a config at toy size, random
weights (seeded), a tokenizer trained in a second on a few sentences, ``save_pretrained`` into
``tmp_path``, then the component's own ``load()``.  The model classes differ per plugin; these
parts do not:

* :func:`byte_bpe` / :func:`tiny_tokenizer` -- a byte-level BPE tokenizer (any text encodes, no
  unknown tokens) trained on a small corpus, with the special tokens your model needs, wrapped as
  a ``transformers`` fast tokenizer that ``save_pretrained`` writes like a hub tokenizer;
* :func:`seed_all` -- seed ``random``, numpy and torch before building weights, so a checkpoint is
  the same in every run;
* :data:`OFFLINE_ENV` -- the environment that keeps ``transformers``/``huggingface_hub`` from
  reaching a hub (for ``run_cli(..., env=OFFLINE_ENV)`` or ``os.environ.update``).

Nothing is imported at module import; ``tokenizers``, ``transformers`` and ``torch`` only when a
function that needs them is called.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

#: a few sentences in the register of the benchmark: enough merges for short prompts
CORPUS: tuple[str, ...] = (
    "Pip tapped on the glass. The moon fell behind the hill! said the little fox.",
    "Lena walks toward the hill holding a glowing lantern; Pip bounds ahead through the grass.",
    "A storybook illustration of a small orange fox and a girl at night, flat shapes.",
    "Look, a boat! Where did the little bear go? Come back here, please.",
    '{"narration": "", "image_prompt": "", "speech": {"utterance": "", "speaker": ""}}',
)

#: no hub access from transformers, huggingface_hub or diffusers
OFFLINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
}


def byte_bpe(
    corpus: Iterable[str] = CORPUS,
    *,
    vocab_size: int = 300,
    special_tokens: Sequence[str] = (),
    merges: bool = True,
) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer``.

    With ``merges`` it is trained on ``corpus`` up to ``vocab_size`` (special tokens first, in
    order, so their ids are ``0..n-1``); without, its vocabulary is the 256 byte symbols after the
    special tokens (every character is its own token: scripted replies stay predictable).
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    if merges:
        tok = Tokenizer(models.BPE())
    else:
        vocab: dict[str, int] = {t: i for i, t in enumerate(special_tokens)}
        for char in sorted(pre_tokenizers.ByteLevel.alphabet()):
            vocab.setdefault(char, len(vocab))
        tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if merges:
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(special_tokens),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(list(corpus), trainer)
    elif special_tokens:
        tok.add_special_tokens(
            [AddedToken(t, special=True, normalized=False) for t in special_tokens]
        )
    return tok


def tiny_tokenizer(
    corpus: Iterable[str] = CORPUS,
    *,
    vocab_size: int = 300,
    special_tokens: Sequence[str] = (),
    merges: bool = True,
    cls: Any = None,
    **kwargs: Any,
) -> Any:
    """:func:`byte_bpe` wrapped as ``cls`` (default ``transformers.PreTrainedTokenizerFast``);
    ``kwargs`` name its special tokens and options (``eos_token="</s>"``, ``pad_token=...``,
    ``padding_side="left"``, ``extra_special_tokens={...}``)."""
    if cls is None:
        from transformers import PreTrainedTokenizerFast as cls
    tok = byte_bpe(corpus, vocab_size=vocab_size, special_tokens=special_tokens, merges=merges)
    return cls(tokenizer_object=tok, **kwargs)


def seed_all(seed: int = 0) -> None:
    """Seed ``random``, numpy and torch (whichever are installed) before building weights."""
    import random

    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # pragma: no cover - numpy is a core dependency
        pass
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)


__all__ = ["CORPUS", "OFFLINE_ENV", "byte_bpe", "seed_all", "tiny_tokenizer"]
