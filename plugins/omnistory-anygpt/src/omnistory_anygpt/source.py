"""AnyGPT's inference code: a checkout of the git repository OpenMOSS/AnyGPT, imported from it.

Nothing of AnyGPT is vendored and it is not on PyPI.  The user clones the repository and passes its
directory as ``backbone.source_dir``; ``load()`` puts the two folders the upstream scripts run from
on ``sys.path`` -- the checkout's root (``seed2``, ``soundstorm_speechtokenizer``) and
``anygpt/src`` (``m_utils``, ``infer``) -- and imports the names the benchmark's runner uses.
``speechtokenizer`` is the PyPI package of the same name (``speechtokenizer==0.1.2``).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPOSITORY = "https://github.com/OpenMOSS/AnyGPT"
#: the newest commit of the repository when this plugin was written (its default branch, Aug 2024)
PINNED_COMMIT = "282b58fa96ae3f14d639b23f47b4732bf68883f0"
#: the environment variable the shipped config reads ``source_dir`` from
SOURCE_ENV = "OMNISTORY_SOURCE_BACKBONE_ANYGPT"
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

GET_IT = (
    f"get it with `git clone {REPOSITORY} AnyGPT && git -C AnyGPT checkout {PINNED_COMMIT[:7]}` "
    f"and pass backbone.source_dir=$PWD/AnyGPT (or export {SOURCE_ENV}=$PWD/AnyGPT)"
)


class SourceError(ValueError):
    """``source_dir`` is missing or not a checkout of AnyGPT (the message is one line)."""


def check_source_dir(value: Any) -> Path:
    """The checkout's directory, or a :class:`SourceError` naming the parameter and the commands."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise SourceError(
            "backbone=anygpt: backbone.source_dir is not set; AnyGPT's inference code is a git "
            f"repository, {GET_IT}"
        )
    if not isinstance(value, str | os.PathLike):
        raise SourceError(f"backbone=anygpt: backbone.source_dir must be a path, got {value!r}")
    path = Path(value).expanduser()
    if not path.is_dir():
        raise SourceError(
            f"backbone=anygpt: backbone.source_dir={str(value)!r} is not a directory; {GET_IT}"
        )
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise SourceError(
            f"backbone=anygpt: backbone.source_dir={str(value)!r} is not a checkout of "
            f"OpenMOSS/AnyGPT (no {', '.join(missing)}); {GET_IT}"
        )
    return path.resolve()


def tree_digest(root: Path) -> str:
    """SHA-256 over the Python code the backbone runs (a path would differ between machines)."""
    files: list[Path] = []
    for folder in DIGEST_DIRS:
        files += sorted(p for p in (root / folder).rglob("*.py") if "__pycache__" not in p.parts)
    files += [root / name for name in DIGEST_FILES]
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def git_revision(root: Path) -> str | None:
    """The commit checked out in ``root`` (read from ``.git`` without running git), or None."""
    git = root / ".git"
    if git.is_file():  # a worktree or submodule: "gitdir: <path>"
        text = git.read_text(encoding="utf-8").strip()
        if not text.startswith("gitdir:"):
            return None
        git = (root / text.split(":", 1)[1].strip()).resolve()
    try:
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    if not head.startswith("ref:"):
        return head or None
    ref = head.split(":", 1)[1].strip()
    try:
        return (git / ref).read_text(encoding="utf-8").strip() or None
    except OSError:
        pass
    try:
        for line in (git / "packed-refs").read_text(encoding="utf-8").splitlines():
            sha, _, name = line.partition(" ")
            if name.strip() == ref:
                return sha.strip()
    except OSError:
        pass
    return None


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


def _inside(module: Any, root: Path) -> bool:
    file = getattr(module, "__file__", None)
    if not file:
        return False
    try:
        Path(file).resolve().relative_to(root)
    except ValueError:
        return False
    return True


def import_upstream(root: Path) -> Upstream:
    """Import AnyGPT's modules from the checkout at ``root``.

    Modules named like the checkout's packages but imported from somewhere else (another checkout,
    another git-only model) are dropped from ``sys.modules`` first, so the names resolve here.
    """
    root = root.resolve()
    for name in list(sys.modules):
        if name.split(".", 1)[0] in PACKAGES and not _inside(sys.modules[name], root):
            del sys.modules[name]
    for entry in reversed([str((root / rel).resolve()) for rel in PATH_ENTRIES]):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    importlib.invalidate_caches()
    seed = importlib.import_module("seed2.seed_llama_tokenizer")
    voice = importlib.import_module("infer.voice_clone")
    tokens = importlib.import_module("m_utils.anything2token")
    conversation = importlib.import_module("m_utils.conversation")
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
