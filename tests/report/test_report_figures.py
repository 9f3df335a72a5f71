"""Figures: drawn from the leaderboard with paradigm colours, oracle marks, empty-data fallbacks."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from omnistory_report import figures as fig
from omnistory_report.analysis import LEADERBOARD_COLUMNS
from omnistory_report.tables import format_value, markdown_table
from PIL import Image


def _lb() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    data = {c: rng.uniform(0.5, 0.9, 3) for c in LEADERBOARD_COLUMNS[1:]}
    lb = pd.DataFrame({"system": ["a", "b", "c"], **data})
    lb["total"] = [7.0, 6.0, 5.0]
    lb["total_zero"] = [6.9, 5.0, 5.0]
    for m in ("missing_text", "missing_image", "missing_speech"):
        lb[m] = [0, 12, 0]
    return lb


@pytest.fixture
def info() -> pd.DataFrame:
    return pd.DataFrame(
        {"paradigm": ["orchestration", "any-to-any", "baseline"], "oracle": [False, False, True]},
        index=pd.Index(["a", "b", "c"], name="system"),
    )


def _colors(png) -> set[tuple[int, int, int]]:
    with Image.open(png) as img:
        pixels = np.asarray(img.convert("RGB")).reshape(-1, 3)
    return set(map(tuple, np.unique(pixels, axis=0).tolist()))


def _texts(svg_path) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg_path.read_text())


def _hex(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))


def test_ranking_uses_paradigm_colours_and_marks_oracle(tmp_path, info):
    png = fig.ranking_figure(_lb(), info, tmp_path)
    colors = _colors(png)
    for p in ("orchestration", "any-to-any", "baseline"):
        assert _hex(fig.PARADIGM_COLORS[p]) in colors
    svg = png.with_suffix(".svg").read_text()
    assert "c (ORACLE)" in svg and "oracle" in svg


def test_missing_figure_lists_only_failing_systems(tmp_path, info):
    png = fig.missing_figure(_lb(), info, tmp_path, pd.Series({"b": 12}))
    texts = _texts(png.with_suffix(".svg"))
    assert "b" in texts and "a" not in texts and "c (ORACLE)" not in texts
    assert "orchestration JSON errors" in texts and "missing speech" in texts
    assert _hex(fig.MODALITY_COLORS["plan"]) in _colors(png)


def test_valid_vs_zero_and_heatmap_and_categories(tmp_path, info):
    lb = _lb()
    fig.valid_vs_zero_figure(lb, info, tmp_path)
    texts = _texts(tmp_path / "fig13_valid_vs_zero.svg")
    assert "b" in texts and "a" in texts  # systems whose total drops are annotated
    assert "c (ORACLE)" not in texts  # no drop, no label
    mat = pd.DataFrame(np.eye(2), index=["text", "image"], columns=["text", "image"])
    assert "1.00" in fig.correlation_heatmap(mat, tmp_path).with_suffix(".svg").read_text()
    crit = pd.DataFrame({"alignment_with_metadata": [7.0, 5.0, 6.0]}, index=["a", "b", "c"])
    svg = fig.image_categories_figure(crit, info, tmp_path).with_suffix(".svg").read_text()
    assert "alignment with" in svg and "any-to-any" in svg


def test_empty_inputs_draw_a_message(tmp_path, info):
    empty = _lb().iloc[0:0]
    assert "No system" in fig.ranking_figure(empty, info, tmp_path).with_suffix(".svg").read_text()
    svg = fig.missing_figure(empty, info, tmp_path).with_suffix(".svg").read_text()
    assert "No generation failures" in svg
    svg = fig.image_categories_figure(pd.DataFrame(), info, tmp_path).with_suffix(".svg")
    assert "No image-judge scores" in svg.read_text()


def test_markdown_and_value_formatting():
    frame = pd.DataFrame({"name": ["a|b"], "x": [np.nan], "n": [3.0], "f": [0.123456], "t": [True]})
    md = markdown_table(frame)
    assert "a\\|b" in md and "—" in md and "| 3 |" in md and "0.1235" in md and "yes" in md
    assert format_value(4.0, 3, trim_integers=False) == "4.000"
    assert format_value(1.5e-7) == "1.500e-07"
