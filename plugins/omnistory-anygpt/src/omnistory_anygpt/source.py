"""AnyGPT's inference code: a checkout of the git repository OpenMOSS/AnyGPT, imported from it.

Nothing of AnyGPT is vendored and it is not on PyPI.  The user clones the repository and passes its
directory as ``backbone.source_dir``; ``load()`` puts the two folders the upstream scripts run from
on ``sys.path`` -- the checkout's root (``seed2``, ``soundstorm_speechtokenizer``) and
``anygpt/src`` (``m_utils``, ``infer``) -- and imports the names the benchmark's runner uses.
``speechtokenizer`` is the PyPI package of the same name (``speechtokenizer==0.1.2``).
Checking, digesting and importing are :mod:`omnistory_core.kit.checkout`'s.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.api import CheckoutError as SourceError
from omnistory_core.kit.checkout import Checkout, git_revision

REPOSITORY = "https://github.com/OpenMOSS/AnyGPT"
#: the newest commit of the repository when this plugin was written (its default branch, Aug 2024)
PINNED_COMMIT = "282b58fa96ae3f14d639b23f47b4732bf68883f0"
#: the checkout's folders that go on ``sys.path``, relative to its root, in import priority
PATH_ENTRIES: tuple[str, ...] = ("anygpt/src", ".")
#: files of the checkout this plugin imports (checked before anything loads)
REQUIRED_FILES: tuple[str, ...] = (
    "seed2/seed_llama_tokenizer.py",
    "soundstorm_speechtokenizer/__init__.py",
    "anygpt/src/infer/voice_clone.py",
    "anygpt/src/m_utils/anything2token.py",
    "anygpt/src/m_utils/conversation.py",
)
#: the code whose contents identify the model in the cache key: folders (all *.py) and files
DIGEST_DIRS: tuple[str, ...] = ("seed2", "soundstorm_speechtokenizer", "anygpt/src/m_utils")
DIGEST_FILES: tuple[str, ...] = ("anygpt/src/infer/voice_clone.py",)
#: top-level package names of the checkout (generic names: other git-only models may use them)
PACKAGES: tuple[str, ...] = ("seed2", "soundstorm_speechtokenizer", "m_utils", "infer")

CHECKOUT = Checkout(
    component="backbone=anygpt",
    name="AnyGPT",
    repository=REPOSITORY,
    commit=PINNED_COMMIT,
    code="inference code",
    required_files=REQUIRED_FILES,
    packages=PACKAGES,
    digest_dirs=DIGEST_DIRS,
    digest_files=DIGEST_FILES,
    path_first=PATH_ENTRIES,
)
#: the environment variable the shipped config reads ``source_dir`` from
SOURCE_ENV = CHECKOUT.env
GET_IT = CHECKOUT.get_it()

check_source_dir = CHECKOUT.check_dir
tree_digest = CHECKOUT.digest


@dataclass(frozen=True)
class Upstream:
    """The upstream names the backbone calls."""

    ImageTokenizer: Any  # seed2.seed_llama_tokenizer.ImageTokenizer (SEED tokenizer + unCLIP)
    SpeechTokenizer: Any  # speechtokenizer.SpeechTokenizer
    load_soundstorm: Any  # infer.voice_clone.load_soundstorm(path)
    semantic2acoustic: Any  # infer.voice_clone.semantic2acoustic(semantic, prompt, ss, st, steps)
    get_conv_template: Any  # m_utils.conversation.get_conv_template("MMGPT")
    modal_special_str: Any  # m_utils.anything2token.modal_special_str
    modality_tokens_to_string: Any  # m_utils.anything2token.modality_tokens_to_string


def import_upstream(root: Path) -> Upstream:
    """Import AnyGPT's modules from the checkout at ``root`` (same-named modules imported from
    elsewhere are dropped first), and ``speechtokenizer`` from the environment."""
    seed, voice, tokens, conversation = CHECKOUT.import_modules(
        root,
        "seed2.seed_llama_tokenizer",
        "infer.voice_clone",
        "m_utils.anything2token",
        "m_utils.conversation",
    )
    speech = importlib.import_module("speechtokenizer")
    return Upstream(
        ImageTokenizer=seed.ImageTokenizer,
        SpeechTokenizer=speech.SpeechTokenizer,
        load_soundstorm=voice.load_soundstorm,
        semantic2acoustic=voice.semantic2acoustic,
        get_conv_template=conversation.get_conv_template,
        modal_special_str=tokens.modal_special_str,
        modality_tokens_to_string=tokens.modality_tokens_to_string,
    )


__all__ = [
    "CHECKOUT",
    "GET_IT",
    "PINNED_COMMIT",
    "REPOSITORY",
    "REQUIRED_FILES",
    "SOURCE_ENV",
    "SourceError",
    "Upstream",
    "check_source_dir",
    "git_revision",
    "import_upstream",
    "tree_digest",
]
