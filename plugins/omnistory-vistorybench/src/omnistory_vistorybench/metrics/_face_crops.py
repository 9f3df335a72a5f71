"""What the face models and their aligners share, below all of them: the official crop size, a
crop as the BGR array OpenCV gives the official models, and the face detectors' weight files.

:mod:`.face` (the ``face_mix`` encoder), :mod:`._arcface`, :mod:`._scrfd` and
:mod:`._retinaface` import it; it imports none of them (so they form no import circle).  PIL is
imported in :func:`face_pixels`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

# numpy is imported where it is used: registering the metrics (in every process that discovers
# the plugins) stays without it
if TYPE_CHECKING:
    import numpy as np


#: the face detectors' files: antelopev2's SCRFD (beside glintr100.onnx) and facexlib's
#: RetinaFace (``facexlib/weights/`` of the facexlib package, fetched at first use)
SCRFD_FILE = "scrfd_10g_bnkps.onnx"
RETINAFACE_FILE = "detection_Resnet50_Final.pth"
#: FaceRestoreHelper's face_size in the official evaluator
FACE_SIZE = 112


def face_pixels(images: Sequence[Any], size: int = FACE_SIZE) -> np.ndarray:
    """``(n, size, size, 3)`` uint8 BGR arrays: each RGB PIL crop resized whole (bilinear),
    in the channel order OpenCV gives the official models."""
    import numpy as np
    from PIL import Image

    rows = []
    for image in images:
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        resized = rgb.resize((size, size), Image.Resampling.BILINEAR)
        rows.append(np.asarray(resized, dtype=np.uint8)[:, :, ::-1])
    return np.stack(rows) if rows else np.zeros((0, size, size, 3), np.uint8)


__all__ = ["FACE_SIZE", "RETINAFACE_FILE", "SCRFD_FILE", "face_pixels"]
