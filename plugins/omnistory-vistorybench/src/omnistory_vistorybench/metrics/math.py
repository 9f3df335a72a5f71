"""The pure scoring functions of the ViStoryBench metrics (numpy and scipy only).

Each function computes what the official evaluators compute (ViStoryBench/vistorybench @ 514cc31,
``bench/content/cids_evaluator.py``, ``bench/style/csd_evaluator.py``,
``bench/diversity/inception_score.py``, ``bench/prompt_align/prompt_align_evaluator.py``) from
numbers that the model wrappers produce: detection counts, similarity matrices, embeddings,
class probabilities, parsed judge scores.  Nothing here loads a model or opens an image.

Where the official code has a quirk, the function keeps it when ``faithful=True`` (the default,
so that our numbers match the published ones) and offers the principled alternative with
``faithful=False``.  :data:`.quirks.FIDELITY` lists every such switch as ``(metric, quirk, faithful
behaviour, alternative)``; a metric class passes its own ``faithful`` parameter down.

:data:`omnistory_vistorybench.fidelity.OPTIONS` and ``DEPARTURES`` list the named options
and the ports that differ from the official code.

"Undefined" in the alternatives is ``None``: a story-level value left out of later means
instead of a number that reads like a measurement.

The semantics are those of that commit, which postdate the paper: the Hungarian assignment of
characters to boxes (December 2025) and the mirror-based copy-paste rate (January 2026).  Numbers
published before then were computed differently; no switch reproduces the older code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

# numpy is imported where it is used: registering the metrics (in every process that discovers
# the plugins) stays without it
if TYPE_CHECKING:
    import numpy as np


R = TypeVar("R")

#: the similarity the official code gives a (character, candidate) pair that its encoder could
#: not embed, so that the assignment avoids it
INVALID_SIMILARITY = -1e6
#: OCCM's epsilon in ``exp(-|D-E| / (eps + E))``
OCCM_EPS = 1e-6
#: the temperature of the copy-paste softmax over (original, mirrored) similarities
COPY_PASTE_TEMPERATURE = 0.01
#: the decimals the official CIDS evaluator rounds per-character and story values to
CIDS_DECIMALS = 4


# -- OCCM ---------------------------------------------------------------------------------------
class OccmShot(NamedTuple):
    """One story shot as OCCM sees it.

    ``expected`` (E) is the number of characters the shot lists; ``detected`` (D) the number of
    usable detector boxes on its output image, or None when the method listed no image for the
    shot; ``file_missing`` marks an image that was listed but cannot be found (D counts 0).
    """

    expected: int
    detected: int | None
    file_missing: bool = False


def occm_shot(detected: int, expected: int) -> float:
    """``100 * exp(-|D - E| / (1e-6 + E))``: 100 when the counts agree."""
    return 100.0 * math.exp(-abs(detected - expected) / (OCCM_EPS + expected))


def occm_story(shots: Iterable[OccmShot], *, faithful: bool = True) -> float | None:
    """Mean OCCM over the story's shots that have an output image and expect a character.

    Official quirk kept with ``faithful``: a listed-but-missing file is scored before the E=0
    check, so it counts with D=0 even when E=0 (and scores 100 then).  An empty story is 0.0
    (faithful, rounded to 4 decimals like every official OCCM) or None.
    """
    scores: list[float] = []
    for shot in shots:
        if shot.file_missing:
            if shot.expected == 0 and not faithful:
                continue
            scores.append(occm_shot(0, shot.expected))
            continue
        if shot.detected is None or shot.expected == 0:
            continue
        scores.append(occm_shot(shot.detected, shot.expected))
    if not scores:
        return 0.0 if faithful else None
    mean = sum(scores) / len(scores)
    return round(mean, CIDS_DECIMALS) if faithful else mean


# -- detection boxes ----------------------------------------------------------------------------
def crop_rect(box: Sequence[float], width: int, height: int) -> tuple[int, int, int, int] | None:
    """The pixel rectangle ``(left, top, right, bottom)`` the official code crops for a
    normalized ``(cx, cy, w, h)`` detector box, or None for an empty one.

    As the official code does: the box is scaled to pixels and truncated to integers *before*
    the corner conversion (so corners can fall on half pixels), clamped to the image, kept when
    it has positive width and height, and PIL rounds the corners half to even when cropping.
    A rectangle that rounding makes empty is dropped too (PIL would hand the encoder a 0-pixel
    image).
    """
    import numpy as np

    # float32 product truncated toward zero, as ``(boxes * tensor([w, h, w, h])).int()``
    scaled = np.asarray(box, dtype=np.float32)[:4] * np.asarray(
        [width, height, width, height], dtype=np.float32
    )
    cx, cy, bw, bh = (int(v) for v in scaled.astype(np.int64))
    x0 = min(max(cx - 0.5 * bw, 0), width)
    y0 = min(max(cy - 0.5 * bh, 0), height)
    x1 = min(max(cx + 0.5 * bw, 0), width)
    y1 = min(max(cy + 0.5 * bh, 0), height)
    if not (x1 > x0 and y1 > y0):
        return None
    rect = (round(x0), round(y0), round(x1), round(y1))
    if rect[2] <= rect[0] or rect[3] <= rect[1]:
        return None
    return rect


# -- CIDS ---------------------------------------------------------------------------------------
def assign_characters(similarity: Any, valid: Any = None) -> dict[int, int]:
    """Characters (rows) to candidate boxes (columns) by the Hungarian algorithm.

    ``similarity[c, k]`` is the best similarity of candidate ``k`` to any reference of
    character ``c``; ``valid[c, k]`` says whether character ``c``'s encoder could embed
    candidate ``k`` at all.  Invalid entries get :data:`INVALID_SIMILARITY`,
    ``scipy.optimize.linear_sum_assignment`` maximises the total similarity, and an assignment
    to an invalid entry is dropped, as the official code does.  Characters left without a box
    (more characters than boxes, or only invalid boxes) are absent from the result: their shot
    cross-similarity is 0.0.
    """
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    sim = np.asarray(similarity, dtype=np.float64)
    if sim.ndim != 2 or sim.size == 0:
        return {}
    ok = np.ones_like(sim, dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
    if ok.shape != sim.shape:
        raise ValueError(f"valid has shape {ok.shape}, similarity {sim.shape}")
    cost = -np.where(ok, sim, INVALID_SIMILARITY)
    rows, cols = linear_sum_assignment(cost)
    return {int(r): int(c) for r, c in zip(rows, cols, strict=True) if ok[r, c]}


def character_cids(
    cross: Any, self_similarity: Any, *, faithful: bool = True
) -> tuple[float, float | None]:
    """One character's ``(cross, self)`` from its matched crops.

    ``cross`` is the (matched crops x references) similarity matrix: its mean over every entry.
    ``self_similarity`` is the (crops x crops) matrix: the mean of its strict upper triangle.
    A character with no matched crop (``cross`` None or empty) gets ``(0.0, 0.0)`` in both
    modes, as the official code does, and is still averaged into the story.  One crop: self is
    1.0 (faithful) or None.  Values are rounded to 4 decimals when faithful.
    """
    import numpy as np

    cross_m = None if cross is None else np.asarray(cross, dtype=np.float64)
    if cross_m is None or cross_m.size == 0:
        return 0.0, 0.0
    cross_v = float(cross_m.mean())
    self_m = np.asarray(self_similarity, dtype=np.float64)
    n = self_m.shape[0] if self_m.ndim == 2 else 0
    self_v: float | None
    if n > 1:
        upper = np.triu_indices(n, k=1, m=self_m.shape[1])
        self_v = float(self_m[upper].mean())
    else:
        self_v = 1.0 if faithful else None
    if faithful:
        cross_v = round(cross_v, CIDS_DECIMALS)
        self_v = None if self_v is None else round(self_v, CIDS_DECIMALS)
    return cross_v, self_v


def story_cids(
    per_character: Iterable[tuple[float | None, float | None]], *, faithful: bool = True
) -> tuple[float, float]:
    """``(cids_cross_mean, cids_self_mean)``: means over every story character (never-matched
    ones included as 0.0), None values left out, 0.0 when nothing is left; rounded to 4
    decimals when faithful."""
    pairs = list(per_character)
    cross = [c for c, _ in pairs if c is not None]
    selfs = [s for _, s in pairs if s is not None]
    cross_mean = sum(cross) / len(cross) if cross else 0.0
    self_mean = sum(selfs) / len(selfs) if selfs else 0.0
    if faithful:
        return round(cross_mean, CIDS_DECIMALS), round(self_mean, CIDS_DECIMALS)
    return cross_mean, self_mean


def cids_reference_filter(paths: Iterable[str], *, faithful: bool = True) -> list[str]:
    """The reference files CIDS reads, in the order it reads them: sorted paths, and with
    ``faithful`` only those ending in lower-case ``.jpg`` (the official ``**/*.jpg`` glob)."""
    names = sorted(str(p) for p in paths)
    if faithful:
        return [p for p in names if p.endswith(".jpg")]
    return names


# -- copy-paste ---------------------------------------------------------------------------------
def copy_paste_character(
    sim_original: Any, sim_mirrored: Any, temperature: float = COPY_PASTE_TEMPERATURE
) -> float:
    """One matched character's copy-paste rate.

    Per matched crop, the similarities to the primary reference crop and to its mirror image are
    clamped to [-1, 1], a softmax with temperature ``temperature`` (0.01) is taken over the pair,
    and the probability of the original is kept; the rate is its mean over the crops.  A crop
    that is closer to the reference than to its mirror (a pasted reference) scores near 1; a
    redrawn character sits near 0.5.  Lower is better.
    """
    import numpy as np

    a = np.clip(np.asarray(sim_original, dtype=np.float64).ravel(), -1.0, 1.0)
    b = np.clip(np.asarray(sim_mirrored, dtype=np.float64).ravel(), -1.0, 1.0)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"need matching non-empty similarities, got {a.shape} and {b.shape}")
    logits = np.stack([a, b], axis=1) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    p_original = weights[:, 0] / weights.sum(axis=1)
    return float(p_original.mean())


def copy_paste_story(rates: Iterable[float], *, faithful: bool = True) -> float | None:
    """Mean of the matched characters' rates; 0.0 (faithful) or None with none."""
    values = list(rates)
    if not values:
        return 0.0 if faithful else None
    return sum(values) / len(values)


# -- Inception Score ----------------------------------------------------------------------------
def inception_score(
    probabilities: Any, splits: int = 1, *, faithful: bool = True
) -> tuple[float | None, float | None]:
    """``(mean, std)`` of ``exp(mean_j KL(p(y|x_j) || mean_j p(y|x_j)))`` over ``splits``
    consecutive parts of the rows (1 split: the whole run, std 0.0).

    Each row is one image's softmax over the classes; the KL divergence is
    ``scipy.stats.entropy(p_yx, p_y)``, which normalises both.  As the official code does, a part
    is ``n // splits`` rows long (the remainder is dropped) and empty parts are skipped.  No
    rows: ``(0.0, 0.0)`` (faithful) or ``(None, None)``.
    """
    import numpy as np
    from scipy.stats import entropy

    preds = np.asarray(probabilities, dtype=np.float64)
    n = preds.shape[0] if preds.ndim == 2 else 0
    scores: list[float] = []
    size = n // max(1, int(splits))
    for i in range(max(1, int(splits))):
        part = preds[i * size : (i + 1) * size]
        if part.shape[0] == 0:
            continue
        p_y = part.mean(axis=0)
        kl = [float(entropy(row, p_y)) for row in part]
        scores.append(float(np.exp(np.mean(kl))))
    if not scores:
        return (0.0, 0.0) if faithful else (None, None)
    return float(np.mean(scores)), float(np.std(scores))


# -- CSD ----------------------------------------------------------------------------------------
def cosine_matrix(a: Any, b: Any, eps: float = 1e-8) -> np.ndarray:
    """Cosine similarities of the rows of ``a`` and ``b`` (norms floored at ``eps``, like
    ``torch.nn.functional.cosine_similarity``)."""
    import numpy as np

    x = np.atleast_2d(np.asarray(a, dtype=np.float64))
    y = np.atleast_2d(np.asarray(b, dtype=np.float64))
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), eps)
    y = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), eps)
    return x @ y.T


def csd_self(embeddings: Any, *, faithful: bool = True) -> float | None:
    """Mean cosine over all unordered pairs of the story's images; fewer than two images: 0.0
    (faithful) or None."""
    import numpy as np

    emb = np.asarray(embeddings, dtype=np.float64)
    n = emb.shape[0] if emb.ndim == 2 else 0
    if n < 2:
        return 0.0 if faithful else None
    sims = cosine_matrix(emb, emb)
    return float(sims[np.triu_indices(n, k=1)].mean())


def csd_reference(
    char_key: str | None, first_refs: Mapping[str, R | None], *, faithful: bool = True
) -> tuple[str, R] | None:
    """The reference cross-CSD compares a shot with for one onstage character.

    ``first_refs`` maps every story character, in story order, to its first reference image
    (None without one).  The character's own first reference; if it has none (or the key is
    unknown, or ``char_key`` is None: a shot without onstage characters), with ``faithful`` the
    first character that has one, as the official code does; otherwise None.
    """
    if char_key is not None:
        own = first_refs.get(char_key)
        if own is not None:
            return char_key, own
    if not faithful:
        return None
    for key, ref in first_refs.items():
        if ref is not None:
            return key, ref
    return None


def csd_cross_pairs(
    shots: Iterable[tuple[int, Sequence[str]]],
    has_output: Callable[[int], bool],
    first_refs: Mapping[str, R | None],
    *,
    faithful: bool = True,
) -> list[tuple[int, list[tuple[str, R]]]]:
    """Which (character, reference) pairs cross-CSD scores for each story shot with an output:
    ``[(shot_index, [(char_key, ref), ...]), ...]``, shots without any pair left out."""
    plan: list[tuple[int, list[tuple[str, R]]]] = []
    for index, keys in shots:
        if not has_output(index):
            continue
        pairs = [p for k in keys if (p := csd_reference(k, first_refs, faithful=faithful))]
        if not pairs and faithful:
            fallback = csd_reference(None, first_refs, faithful=True)
            pairs = [fallback] if fallback else []
        if pairs:
            plan.append((index, pairs))
    return plan


def csd_cross(shot_scores: Iterable[Sequence[float]], *, faithful: bool = True) -> float | None:
    """Mean over shots of the mean cosine of each shot's (character reference, output) pairs;
    no scored shot: 0.0 (faithful) or None."""
    means = [sum(s) / len(s) for s in shot_scores if len(s)]
    if not means:
        return 0.0 if faithful else None
    return sum(means) / len(means)


def story_mean(values: Iterable[float | None], *, faithful: bool = True) -> float | None:
    """Mean of the values that are not None; none: 0.0 (faithful) or None.  The story value of
    the per-shot prompt-alignment scores and of the per-image aesthetic scores."""
    kept = [float(v) for v in values if v is not None]
    if not kept:
        return 0.0 if faithful else None
    return sum(kept) / len(kept)


# -- single-character action --------------------------------------------------------------------
def single_character_action_shot(scores: Sequence[float], *, faithful: bool = True) -> float | None:
    """A shot's single-character-action score from its matched characters' judge scores:
    ``int(round(mean))`` (faithful; Python rounds half to even) or the float mean.  A shot with
    detections but no matched character: 0 (faithful) or None (skipped)."""
    if not scores:
        return 0 if faithful else None
    mean = sum(scores) / len(scores)
    return int(round(mean)) if faithful else mean


def single_character_action_story(
    shot_scores: Iterable[float | None], *, faithful: bool = True
) -> float | None:
    """The story value: the mean of the shot scores, ``int(round())`` when faithful; None when
    no shot was scored (the official code then reports no value at all)."""
    kept = [float(s) for s in shot_scores if s is not None]
    if not kept:
        return None
    mean = sum(kept) / len(kept)
    return int(round(mean)) if faithful else mean


__all__ = [
    "CIDS_DECIMALS",
    "COPY_PASTE_TEMPERATURE",
    "INVALID_SIMILARITY",
    "OCCM_EPS",
    "OccmShot",
    "assign_characters",
    "character_cids",
    "cids_reference_filter",
    "copy_paste_character",
    "copy_paste_story",
    "cosine_matrix",
    "crop_rect",
    "csd_cross",
    "csd_cross_pairs",
    "csd_reference",
    "csd_self",
    "inception_score",
    "occm_shot",
    "occm_story",
    "single_character_action_shot",
    "single_character_action_story",
    "story_mean",
]
