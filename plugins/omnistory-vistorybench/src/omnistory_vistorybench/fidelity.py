"""The README's "Fidelity" table: one row per place where what the official code does and what a
user of this plugin may get differ, written from the code so the documentation cannot drift.

Its rows come from three sources:

* :data:`.metrics.math.FIDELITY` -- official quirks that every metric's ``faithful=true`` (the
  default) reproduces and ``faithful=false`` replaces;
* :data:`OPTIONS` -- official behaviours kept by default, each with a named option that departs
  from it;
* :data:`DEPARTURES` -- ports that run other code than the official's by default, each with
  what a user can do about it.

Each row says the official behaviour, ours by default, the option, and whether a published
number moves with our default.

    python -m omnistory_vistorybench.fidelity            # print the table
    python -m omnistory_vistorybench.fidelity --write    # rewrite it in the plugin's README

The README holds it between the markers :data:`START` and :data:`END`; a test compares them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NamedTuple

START = "<!-- fidelity tables: written by python -m omnistory_vistorybench.fidelity --write -->"
END = "<!-- end of fidelity tables -->"
#: what the "moves" column says of a default that is the official behaviour
SAME = "no (the default is the official behaviour)"


class FidelityRow(NamedTuple):
    """One row of the table."""

    metric: str
    official: str
    default: str
    option: str
    moves: str


#: official behaviours kept by default, each with the named option that departs from it
OPTIONS: tuple[FidelityRow, ...] = (
    FidelityRow(
        "cids (realistic_human characters)",
        "ArcFace = insightface 0.7.3 FaceAnalysis('antelopev2'): SCRFD (scrfd_10g_bnkps.onnx,"
        " 640x640 letterbox, NMS 0.4) finds the face, det_thresh stepped 0.45 -> 0.15 by 0.1"
        " until one is found, norm_crop aligns its 5 landmarks onto ArcFace's 112x112"
        " template, glintr100.onnx embeds it; AdaFace and FaceNet embed the face facexlib's"
        " FaceRestoreHelper (RetinaFace-ResNet50 at confidence 0.97, FFHQ template at 112,"
        " cv2.estimateAffinePartial2D LMEDS) aligns; a model that finds no face has no"
        " feature; a crop where no model finds one is dropped, a box without one is invalid"
        " in the matching",
        "the same, ported (SCRFD on onnxruntime, RetinaFace-ResNet50 in PyTorch with facexlib's"
        " parameter names, alignment with OpenCV); equal scores are ordered later-candidate"
        " first (the official's numpy default sort, which on large arrays is unordered)",
        "`face_alignment=whole_crop`: every crop embedded whole, resized to 112x112, by every"
        " model; every crop is a face",
        SAME + "; only the order of exactly equal detection scores can differ",
    ),
    FidelityRow(
        "cids (all criteria)",
        "ref_mode (config.yaml): origin, the dataset's references; mid-gen, each character's"
        " image among the method's chars/ (file name before its first dot = the key, or"
        " containing the English name; the paper's Table S8)",
        "`ref_mode=origin`",
        "`ref_mode=mid-gen`: the method's chars/ images (a character without one: the story"
        " is invalid, as the official asserts)",
        SAME,
    ),
    FidelityRow(
        "inception_score",
        "the published lite/full tables hold utils/add_inception_score_to_result_csv.py's"
        " value: every timestamp folder of the method, mode and language read together, the"
        " shot images (.png/.jpg/.jpeg) of the split's stories (bench_run.py's own summary"
        " scores one run's whole output folder instead)",
        "`images=pooled`: the published tables' value, per split (the run's own split and, for"
        " a full run, lite)",
        "`images=run`: one run's output folder (bench_run.py's summary)",
        SAME + "; a story in several timestamps takes the newest folder (the official: the"
        " one its directory listing returns last)",
    ),
)

#: ports that do not run the official code by default, and what a user can do about them
DEPARTURES: tuple[FidelityRow, ...] = (
    FidelityRow(
        "cids (all criteria)",
        "GroundingDINO SwinT-OGC through groundingdino-py 0.4.0 (groundingdino_swint_ogc.pth,"
        " BERT bert-base-uncased)",
        "transformers' GroundingDinoForObjectDetection + AutoProcessor on an HF checkpoint"
        " (IDEA-Research/grounding-dino-tiny is the same SwinT-OGC weights, converted); same"
        " caption, resize, normalisation and box filter (groundingdino-py's BERT wrapper"
        " breaks on transformers 5: IDEA-Research/GroundingDINO#446, #458)",
        "`detector=NAME`: any detector registered with cids.register_detector, e.g."
        " groundingdino-py wrapped in an environment with transformers 4",
        "possibly: float differences can flip a box at the 0.25 thresholds",
    ),
)


def rows() -> list[FidelityRow]:
    """Every row: the ``faithful`` quirks, the named options, the departures."""
    from omnistory_vistorybench.metrics.math import FIDELITY

    quirks = [
        FidelityRow(metric, official, faithful, f"`faithful=false`: {alternative}", SAME)
        for metric, official, faithful, alternative in FIDELITY
    ]
    return [*quirks, *OPTIONS, *DEPARTURES]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def tables() -> str:
    """The table as markdown."""
    lines = [
        "| metric | official behaviour | ours by default | option | a published number moves |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {' | '.join(_cell(c) for c in row)} |" for row in rows()),
    ]
    return "\n".join(lines)


def readme_path() -> Path:
    return Path(__file__).resolve().parents[2] / "README.md"


def readme_tables(text: str) -> str | None:
    """What the README holds between the markers, or None when they are missing."""
    if START not in text or END not in text:
        return None
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


def write(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    if readme_tables(text) is None:
        raise SystemExit(f"{path}: the markers {START!r} and {END!r} are missing")
    head, rest = text.split(START, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(f"{head}{START}\n{tables()}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        write(readme_path())
    else:
        print(tables())
