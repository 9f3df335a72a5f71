"""Hand-computed goldens for the pure ViStoryBench scoring functions (numpy + scipy only)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from omnistory_vistorybench.metrics import math as vm
from omnistory_vistorybench.metrics.math import OccmShot
from omnistory_vistorybench.metrics.quirks import FIDELITY

approx = pytest.approx


# -- OCCM ---------------------------------------------------------------------------------------
def test_occm_shot_formula():
    assert vm.occm_shot(2, 2) == 100.0
    # 100 * exp(-1 / 2.000001)
    assert vm.occm_shot(3, 2) == approx(60.653081, abs=1e-5)
    assert vm.occm_shot(1, 2) == approx(60.653081, abs=1e-5)
    assert vm.occm_shot(0, 1) == approx(36.787981, abs=1e-5)
    assert vm.occm_shot(1, 0) == approx(0.0, abs=1e-300)  # exp(-1e6)


STORY = [
    OccmShot(2, 2),  # 100
    OccmShot(2, 3),  # 60.653081
    OccmShot(0, 1),  # E=0: skipped
    OccmShot(1, None),  # no output listed: skipped
    OccmShot(0, 0, file_missing=True),  # faithful: D=0, E=0 -> 100
    OccmShot(2, 0, file_missing=True),  # D=0, E=2 -> 100 exp(-2/2.000001) = 36.787963
]


def test_occm_story_faithful_counts_missing_files_even_with_no_character():
    # (100 + 60.653081 + 100 + 36.787963) / 4 = 74.360261, rounded to 4 decimals
    assert vm.occm_story(STORY) == 74.3603


def test_occm_story_alternative_skips_every_empty_shot():
    # (100 + 60.653081 + 36.787963) / 3
    assert vm.occm_story(STORY, faithful=False) == approx(65.813681, abs=1e-6)


def test_occm_story_without_scored_shots():
    assert vm.occm_story([OccmShot(0, 3), OccmShot(2, None)]) == 0.0
    assert vm.occm_story([], faithful=False) is None


# -- boxes --------------------------------------------------------------------------------------
def test_crop_rect_scales_truncates_then_converts():
    assert vm.crop_rect((0.5, 0.5, 0.5, 0.5), 100, 80) == (25, 20, 75, 60)
    # 11 px: cx = int(5.5) = 5, w = int(3.3) = 3 -> corners 3.5 / 6.5, rounded half to even
    assert vm.crop_rect((0.5, 0.5, 0.3, 0.3), 11, 11) == (4, 4, 6, 6)
    # clamped to the image
    assert vm.crop_rect((0.05, 0.5, 0.3, 1.0), 100, 100) == (0, 0, 20, 100)


def test_crop_rect_uses_float32_like_the_official_tensors():
    # 0.29 * 100 is 28.999999999999996 in float64 but 29.0 in float32
    assert int(0.29 * 100) == 28
    assert vm.crop_rect((0.29, 0.5, 0.2, 0.2), 100, 100) == (19, 40, 39, 60)


def test_crop_rect_empty_boxes():
    assert vm.crop_rect((0.5, 0.5, 0.0, 0.5), 100, 100) is None
    assert vm.crop_rect((1.5, 0.5, 0.2, 0.2), 100, 100) is None  # entirely outside
    # w = int(0.015 * 100) = 1 -> corners 49.5 / 50.5 round to 50 / 50: nothing to crop
    assert vm.crop_rect((0.5, 0.5, 0.015, 0.5), 100, 100) is None


# -- CIDS matching ------------------------------------------------------------------------------
def test_hungarian_beats_greedy():
    # greedy gives character 0 candidate 0 (0.9 + 0.1 = 1.0); the optimum is 0.8 + 0.85
    sim = [[0.9, 0.8], [0.85, 0.1]]
    assert vm.assign_characters(sim) == {0: 1, 1: 0}


def test_hungarian_leaves_a_character_unmatched():
    sim = [[0.9, 0.8], [0.85, 0.1], [0.3, 0.2]]  # three characters, two boxes
    assert vm.assign_characters(sim) == {0: 1, 1: 0}


def test_hungarian_respects_invalid_entries():
    sim = [[0.9, 0.8], [0.85, 0.1]]
    assert vm.assign_characters(sim, [[True, False], [True, True]]) == {0: 0, 1: 1}
    # a character its encoder could embed nothing for is assigned nothing
    assert vm.assign_characters(sim, [[True, True], [False, False]]) == {0: 0}
    assert vm.assign_characters(np.zeros((2, 0))) == {}


def test_character_cids_full_cross_matrix_and_upper_triangle():
    cross = [[0.5, 0.7], [0.3, 0.1]]  # mean 0.4
    self_sim = [[1.0, 0.6], [0.6, 1.0]]
    assert vm.character_cids(cross, self_sim) == (0.4, 0.6)
    three = [[1.0, 0.2, 0.4], [0.2, 1.0, 0.9], [0.4, 0.9, 1.0]]  # (0.2 + 0.4 + 0.9) / 3
    assert vm.character_cids([[0.1] * 2] * 3, three) == (0.1, 0.5)


def test_character_cids_one_crop_and_never_matched():
    one = [[0.12345678, 0.2]]  # mean 0.16172839
    assert vm.character_cids(one, [[1.0]]) == (0.1617, 1.0)
    cross, self_v = vm.character_cids(one, [[1.0]], faithful=False)
    assert cross == approx(0.16172839) and self_v is None
    assert vm.character_cids(None, None) == (0.0, 0.0)
    assert vm.character_cids(np.zeros((0, 3)), None, faithful=False) == (0.0, 0.0)


def test_story_cids_averages_never_matched_characters_in():
    per_char = [(0.4, 0.6), (0.0, 0.0), (0.1617, 1.0)]
    # cross (0.4 + 0 + 0.1617) / 3 = 0.18723; self 1.6 / 3 = 0.53333
    assert vm.story_cids(per_char) == (0.1872, 0.5333)
    cross, self_mean = vm.story_cids([(0.4, 0.6), (0.0, 0.0), (0.16172839, None)], faithful=False)
    assert cross == approx(0.18724280) and self_mean == approx(0.3)
    assert vm.story_cids([]) == (0.0, 0.0)


def test_reference_filter_is_the_jpg_glob():
    paths = ["r/b.jpg", "r/a.png", "r/c.JPG", "r/a.jpg", "r/d.jpeg"]
    assert vm.cids_reference_filter(paths) == ["r/a.jpg", "r/b.jpg"]
    assert vm.cids_reference_filter(paths, faithful=False) == sorted(paths)


# -- copy-paste ---------------------------------------------------------------------------------
def test_copy_paste_mirror_softmax():
    # softmax([0.9, 0.8] / 0.01)[0] = 1 / (1 + e^-10) = 0.9999546; a tie is 0.5
    assert vm.copy_paste_character([0.9], [0.8]) == approx(0.9999546, abs=1e-7)
    assert vm.copy_paste_character([0.5], [0.5]) == 0.5
    assert vm.copy_paste_character([0.9, 0.5], [0.8, 0.5]) == approx(0.7499773, abs=1e-7)
    # closer to the mirror: 1 / (1 + e^1)
    assert vm.copy_paste_character([0.80], [0.81]) == approx(0.2689414, abs=1e-7)
    # clamped to [-1, 1] first: softmax([1.0, 0.99] / 0.01) = 1 / (1 + e^-1)
    assert vm.copy_paste_character([1.5], [0.99]) == approx(0.7310586, abs=1e-7)
    with pytest.raises(ValueError):
        vm.copy_paste_character([], [])


def test_copy_paste_story():
    assert vm.copy_paste_story([0.5, 1.0]) == 0.75
    assert vm.copy_paste_story([]) == 0.0
    assert vm.copy_paste_story([], faithful=False) is None


# -- Inception Score ----------------------------------------------------------------------------
def test_inception_score_of_known_tables():
    assert vm.inception_score([[1.0, 0.0], [0.0, 1.0]]) == (approx(2.0), 0.0)  # exp(log 2)
    assert vm.inception_score([[0.5, 0.5], [0.5, 0.5]]) == (approx(1.0), 0.0)
    # p(y) = (0.75, 0.25); KL = 0.5 ln(2/3) + 0.5 ln 2 = 0.143841 and ln(4/3) = 0.287682
    mean, std = vm.inception_score([[0.5, 0.5], [1.0, 0.0]])
    assert mean == approx(math.exp((0.143841 + 0.287682) / 2), abs=1e-6)
    assert mean == approx(1.240806, abs=1e-6) and std == 0.0
    # rows are normalised (scipy.stats.entropy)
    assert vm.inception_score([[2.0, 0.0], [0.0, 2.0]])[0] == approx(2.0)


def test_inception_score_splits_drop_the_remainder():
    # 3 rows, 2 splits: parts of 1 row each (the third is dropped), each scoring exp(0)
    assert vm.inception_score([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]], splits=2) == (1.0, 0.0)
    table = [[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]]
    assert vm.inception_score(table, splits=2) == (approx(1.5), approx(0.5))  # 2 and 1


def test_inception_score_without_images():
    assert vm.inception_score(np.zeros((0, 10))) == (0.0, 0.0)
    assert vm.inception_score([], faithful=False) == (None, None)


# -- CSD ----------------------------------------------------------------------------------------
def test_csd_self_pairs():
    # cosines: (0,1) 0, (0,2) and (1,2) 1/sqrt(2)
    assert vm.csd_self([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]) == approx(2 / math.sqrt(2) / 3)
    assert vm.csd_self([[3.0, 4.0], [6.0, 8.0]]) == approx(1.0)
    assert vm.csd_self([[1.0, 0.0]]) == 0.0
    assert vm.csd_self([[1.0, 0.0]], faithful=False) is None


def test_cosine_matrix_zero_vector():
    assert vm.cosine_matrix([[0.0, 0.0]], [[1.0, 0.0]])[0, 0] == 0.0


FIRST_REFS = {"A": None, "B": "b0", "C": "c0"}
SHOTS = [(1, ["A"]), (2, ["C", "X"]), (3, []), (4, ["C"])]


def test_csd_cross_pairs_faithful_fallbacks():
    plan = vm.csd_cross_pairs(SHOTS, lambda i: i != 4, FIRST_REFS)
    assert plan == [
        (1, [("B", "b0")]),  # A has no reference: the first character that has one
        (2, [("C", "c0"), ("B", "b0")]),  # X is unknown: the same fallback
        (3, [("B", "b0")]),  # nobody onstage: the same fallback
    ]


def test_csd_cross_pairs_alternative_skips():
    plan = vm.csd_cross_pairs(SHOTS, lambda i: i != 4, FIRST_REFS, faithful=False)
    assert plan == [(2, [("C", "c0")])]
    assert vm.csd_reference("B", FIRST_REFS, faithful=False) == ("B", "b0")
    assert vm.csd_reference(None, {"A": None}) is None


def test_csd_cross_mean_of_shot_means():
    assert vm.csd_cross([[0.5], [0.2, 0.4], [0.9]]) == approx((0.5 + 0.3 + 0.9) / 3)
    assert vm.csd_cross([]) == 0.0
    assert vm.csd_cross([], faithful=False) is None


# -- prompt alignment and single-character action -----------------------------------------------
def test_story_mean():
    assert vm.story_mean([3, 4, None, 2]) == 3.0
    assert vm.story_mean([]) == 0.0
    assert vm.story_mean([None], faithful=False) is None


def test_single_character_action_rounds_half_to_even():
    assert vm.single_character_action_shot([3, 4]) == 4  # 3.5
    assert vm.single_character_action_shot([2, 3]) == 2  # 2.5: Python's round
    assert vm.single_character_action_shot([2, 3], faithful=False) == 2.5
    assert vm.single_character_action_shot([]) == 0
    assert vm.single_character_action_shot([], faithful=False) is None
    assert vm.single_character_action_story([4, 2, 0]) == 2
    assert vm.single_character_action_story([3, 4]) == 4
    assert vm.single_character_action_story([3, 4], faithful=False) == 3.5
    assert vm.single_character_action_story([None, 2, 3], faithful=False) == 2.5
    assert vm.single_character_action_story([]) is None


def test_fidelity_table_shape():
    assert len(FIDELITY) >= 15
    for row in FIDELITY:
        assert len(row) == 4 and all(isinstance(s, str) and s.strip() for s in row)
    named = " ".join(row[0] for row in FIDELITY)
    for criterion in (
        "occm",
        "cids_self_mean",
        "copy_paste_score",
        "self_csd",
        "cross_csd",
        "aesthetic_score",
        "inception_score",
        "scene",
        "single_character_action",
    ):
        assert criterion in named
