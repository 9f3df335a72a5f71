"""Omni-Diffusion's git-only code: a checkout of VITA-MLLM/Omni-Diffusion with its GLM-4-Voice
submodule, imported from its root.

The model itself is remote code in the hub checkpoint (``AutoModel`` with ``trust_remote_code``);
what only the git repository holds is the glue around it: the MAGVIT-v2 image tokenizer class and
the image transform (``omni_diffusion/``), and the GLM-4-Voice flow-matching + HiFT speech decoder
(``third_party/GLM-4-Voice/flow_inference.py``, which needs CosyVoice and Matcha-TTS from the same
submodule).  Nothing of it is vendored: ``load()`` puts the checkout on ``sys.path`` the way the
official runner does and imports those modules.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPOSITORY = "https://github.com/VITA-MLLM/Omni-Diffusion.git"
#: the newest upstream commit when this plugin was written (its GLM-4-Voice submodule is
#: shenyunhang/GLM-4-Voice 54d6672, whose Matcha-TTS submodule is dd9105b)
PINNED_COMMIT = "c4f4625f84197a72d556ea00f10e5b2775524252"
#: the environment variable the shipped config reads ``source_dir`` from
SOURCE_ENV = "OMNISTORY_SOURCE_BACKBONE_OMNIDIFFUSION"

GLM = Path("third_party") / "GLM-4-Voice"
MATCHA = GLM / "third_party" / "Matcha-TTS"
#: files of the checkout this plugin imports
REQUIRED_FILES: tuple[str, ...] = (
    "omni_diffusion/data/processor/image_processor.py",
    "omni_diffusion/models/magvit/modeling_magvitv2.py",
    (GLM / "flow_inference.py").as_posix(),
)
#: the nested submodule the speech decoder's config imports from
REQUIRED_DIRS: tuple[str, ...] = ((MATCHA / "matcha").as_posix(),)
#: top-level module names the checkout provides on ``sys.path``
PACKAGES: tuple[str, ...] = (
    "omni_diffusion",
    "flow_inference",
    "cosyvoice",
    "speech_tokenizer",
    "matcha",
)

GET_IT = (
    f"get it with `git clone {REPOSITORY} Omni-Diffusion && git -C Omni-Diffusion checkout "
    f"{PINNED_COMMIT[:7]} && git -C Omni-Diffusion submodule update --init --recursive` and pass "
    f"backbone.source_dir=$PWD/Omni-Diffusion (or export {SOURCE_ENV}=$PWD/Omni-Diffusion)"
)


class SourceError(ValueError):
    """``source_dir`` is missing or not a usable checkout (the message is one line)."""


def check_source_dir(value: Any) -> Path:
    """The checkout's directory, or a :class:`SourceError` naming the parameter and the commands."""
    if value is None or (isinstance(value, str) and not value.strip()):
        raise SourceError(
            "backbone=omnidiffusion: backbone.source_dir is not set; Omni-Diffusion's image and "
            f"speech tokenizer code is a git repository, {GET_IT}"
        )
    if not isinstance(value, str | os.PathLike):
        raise SourceError(
            f"backbone=omnidiffusion: backbone.source_dir must be a path, got {value!r}"
        )
    path = Path(value).expanduser()
    if not path.is_dir():
        raise SourceError(
            f"backbone=omnidiffusion: backbone.source_dir={str(value)!r} is not a directory; "
            f"{GET_IT}"
        )
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    missing += [name for name in REQUIRED_DIRS if not (path / name).is_dir()]
    if missing:
        submodule = any(name.startswith("third_party/") for name in missing)
        hint = (
            "the GLM-4-Voice submodule is not checked out: run `git -C "
            f"{path} submodule update --init --recursive`"
            if submodule and not any(name.startswith("omni_diffusion/") for name in missing)
            else GET_IT
        )
        raise SourceError(
            f"backbone=omnidiffusion: backbone.source_dir={str(value)!r} is not a complete "
            f"checkout of VITA-MLLM/Omni-Diffusion (no {', '.join(missing)}); {hint}"
        )
    return path.resolve()


def tree_digest(root: Path) -> str:
    """SHA-256 over the Python files of ``omni_diffusion/`` and the GLM-4-Voice submodule (with
    Matcha-TTS): the identity of the code in the cache key (a path differs between machines)."""
    files: list[Path] = []
    for top in (root / "omni_diffusion", root / GLM):
        files += [
            p
            for p in top.rglob("*.py")
            if "__pycache__" not in p.parts and ".git" not in p.parts and p.is_file()
        ]
    digest = hashlib.sha256()
    for path in sorted(files):
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
    """The upstream names the backbone uses."""

    #: ``image_transform(pil_image, resolution)`` -> (3, r, r) tensor in [-1, 1]
    image_transform: Any
    #: MAGVIT-v2: ``from_pretrained(dir)``, ``get_code(pixels)``, ``decode_code(codes)``
    MAGVITv2: Any
    #: GLM-4-Voice: ``AudioDecoder(config_path, flow_ckpt_path, hift_ckpt_path, device)``
    AudioDecoder: Any


def _inside(module: Any, root: Path) -> bool:
    file = getattr(module, "__file__", None)
    paths = [file] if file else list(getattr(module, "__path__", []) or [])
    for entry in paths:
        try:
            Path(entry).resolve().relative_to(root)
            return True
        except ValueError:
            continue
    return False


def search_path(root: Path) -> tuple[list[str], list[str]]:
    """(entries put first on ``sys.path``, entries appended): the checkout root, GLM-4-Voice and
    Matcha-TTS first; GLM-4-Voice's ``cosyvoice`` directory, which the official runner also puts on
    the path, last (its subpackages have generic names such as ``utils``)."""
    return [str(root), str(root / GLM), str(root / MATCHA)], [str(root / GLM / "cosyvoice")]


def import_upstream(root: Path) -> Upstream:
    """Import the image tokenizer, the image transform and the speech decoder from ``root``.

    Modules of the checkout's top-level names imported from somewhere else (another checkout) are
    dropped from ``sys.modules`` first, so the names always resolve to this checkout."""
    root = root.resolve()
    for name in list(sys.modules):
        if name.split(".", 1)[0] in PACKAGES and not _inside(sys.modules[name], root):
            del sys.modules[name]
    first, last = search_path(root)
    for entry in reversed(first):
        if entry in sys.path:
            sys.path.remove(entry)
        sys.path.insert(0, entry)
    for entry in last:
        if entry not in sys.path:
            sys.path.append(entry)
    importlib.invalidate_caches()
    processor = importlib.import_module("omni_diffusion.data.processor.image_processor")
    magvit = importlib.import_module("omni_diffusion.models.magvit.modeling_magvitv2")
    flow = importlib.import_module("flow_inference")
    return Upstream(
        image_transform=processor.image_transform,
        MAGVITv2=magvit.MAGVITv2,
        AudioDecoder=flow.AudioDecoder,
    )
