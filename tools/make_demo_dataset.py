#!/usr/bin/env python3
"""Write the bundled demo dataset (``omnistory_core/data/demo/``) deterministically.

Three short children's stories written for this project (10 transitions), with illustrations drawn
procedurally from flat shapes, laid out exactly like the Omni-StoryBench release::

    data/omni_storybench.parquet          samples/<source>/<book>/<from>__<to>.json
    metadata/<source>/<book>.json         images/<source>/<book>/<page>.png
    texts/<source>/<book>/<page>.txt

Texts and pictures are licensed CC-BY-4.0 by the omnistory_core contributors.

Usage: ``python tools/make_demo_dataset.py [--out DIR]`` (default: the package's demo folder).
Running it twice gives identical files.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from omnistory_core.data.schema import (
    LABEL_COLUMNS,
    PARQUET_RELATIVE_PATH,
    REQUIRED_COLUMNS,
    expected_id,
    sample_view,
)

SOURCE = "omnistorydemo"
LICENSE = "CC-BY-4.0"
ATTRIBUTION = "omnistory_core contributors"
IMAGE_SIZE = 384
SUPERSAMPLE = 2  # draw at 2x and downscale for smooth edges
PALETTE_COLORS = 128  # palette PNGs keep the whole demo small
GENERATED_DIRS = ("data", "samples", "metadata", "images", "texts")
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "omnistory_core" / "data" / "demo"

# =============================================================================================
# Stories (original text, CC-BY-4.0, omnistory_core contributors)
# =============================================================================================


@dataclass(frozen=True)
class Speech:
    speaker: str
    emotion: str
    speed: str
    pitch: str
    gender: str


@dataclass(frozen=True)
class PageSpec:
    text: str
    draw: Callable[[Canvas], None]
    # Everything below describes this page as the *next* page of a transition (unused on page 1).
    speech: Speech | None = None
    characters: tuple[dict[str, str], ...] = ()
    scene: str = ""
    text_instruction: str = ""
    ambient_sound: str = ""


@dataclass(frozen=True)
class BookSpec:
    book: str
    title: str
    metadata: dict[str, Any]
    pages: tuple[PageSpec, ...] = field(default_factory=tuple)


def _character(name: str, emotion: str, speech_intent: str, action: str, visibility: str):
    return {
        "name": name,
        "emotion": emotion,
        "speech_intent": speech_intent,
        "action": action,
        "visibility": visibility,
    }


def _person(name, sex, age_range, species, role, personality, appearance) -> dict[str, Any]:
    return {
        "name": name,
        "sex": sex,
        "age_range": age_range,
        "species": species,
        "role": role,
        "personality": list(personality),
        "appearance": appearance,
    }


# =============================================================================================
# Drawing
# =============================================================================================

SKIN_LIGHT = (242, 201, 160)
SKIN_MID = (201, 143, 101)
SKIN_DARK = (141, 90, 59)
INK = (40, 30, 30)
WHITE = (250, 250, 245)


class Canvas:
    """Unit-square drawing surface (0..1 on both axes), supersampled."""

    def __init__(self, background: tuple[int, int, int]):
        self.size = IMAGE_SIZE * SUPERSAMPLE
        self.image = Image.new("RGB", (self.size, self.size), background)
        self.draw = ImageDraw.Draw(self.image)

    def p(self, x: float, y: float) -> tuple[int, int]:
        return round(x * self.size), round(y * self.size)

    def w(self, width: float) -> int:
        return max(1, round(width * self.size))

    def rect(self, x0, y0, x1, y1, fill):
        self.draw.rectangle([*self.p(x0, y0), *self.p(x1, y1)], fill=fill)

    def ellipse(self, cx, cy, rx, ry, fill, outline=None, width=0.0):
        box = [*self.p(cx - rx, cy - ry), *self.p(cx + rx, cy + ry)]
        self.draw.ellipse(box, fill=fill, outline=outline, width=self.w(width) if outline else 0)

    def circle(self, cx, cy, r, fill, outline=None, width=0.0):
        self.ellipse(cx, cy, r, r, fill, outline, width)

    def poly(self, points, fill):
        self.draw.polygon([self.p(x, y) for x, y in points], fill=fill)

    def line(self, points, fill, width):
        self.draw.line([self.p(x, y) for x, y in points], fill=fill, width=self.w(width))

    def arc(self, cx, cy, r, start, end, fill, width):
        box = [*self.p(cx - r, cy - r), *self.p(cx + r, cy + r)]
        self.draw.arc(box, start, end, fill=fill, width=self.w(width))

    def chord(self, cx, cy, rx, ry, start, end, fill):
        box = [*self.p(cx - rx, cy - ry), *self.p(cx + rx, cy + ry)]
        self.draw.chord(box, start, end, fill=fill)

    def finish(self) -> Image.Image:
        small = self.image.resize((IMAGE_SIZE, IMAGE_SIZE), Image.Resampling.LANCZOS)
        return small.quantize(
            colors=PALETTE_COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
        )


# -- faces and figures -------------------------------------------------------------------------


def face(c: Canvas, cx: float, cy: float, r: float, mood: str, dx: float = 0.0) -> None:
    """Eyes and mouth on a head of radius r; dx shifts the features sideways (profile hint)."""
    ex = 0.36 * r
    eye_r = 0.09 * r
    if mood == "scared":
        for side in (-1, 1):
            c.circle(cx + dx + side * ex, cy - 0.08 * r, eye_r * 1.6, WHITE)
            c.circle(cx + dx + side * ex, cy - 0.08 * r, eye_r, INK)
        c.ellipse(cx + dx, cy + 0.42 * r, 0.11 * r, 0.14 * r, INK)
        return
    for side in (-1, 1):
        c.circle(cx + dx + side * ex, cy - 0.08 * r, eye_r, INK)
    if mood == "happy":
        c.arc(cx + dx, cy + 0.12 * r, 0.42 * r, 20, 160, INK, 0.08 * r)
    elif mood == "sad":
        c.arc(cx + dx, cy + 0.62 * r, 0.34 * r, 210, 330, INK, 0.08 * r)
        c.ellipse(cx + dx + ex, cy + 0.16 * r, 0.05 * r, 0.09 * r, (110, 170, 230))  # a tear
    elif mood == "angry":
        for side in (-1, 1):
            c.line(
                [
                    (cx + dx + side * (ex + 0.16 * r), cy - 0.36 * r),
                    (cx + dx + side * 0.1 * r, cy - 0.22 * r),
                ],
                INK,
                0.07 * r,
            )
        c.line(
            [(cx + dx - 0.22 * r, cy + 0.42 * r), (cx + dx + 0.22 * r, cy + 0.42 * r)],
            INK,
            0.08 * r,
        )
    else:  # neutral / surprised
        c.line(
            [(cx + dx - 0.16 * r, cy + 0.4 * r), (cx + dx + 0.16 * r, cy + 0.4 * r)], INK, 0.07 * r
        )


def girl(
    c: Canvas,
    x: float,
    feet: float,
    h: float,
    mood: str,
    *,
    lantern: bool = False,
    arms_up: bool = False,
) -> None:
    """Lena: brown bob, purple dress."""
    head_r = 0.16 * h
    head_y = feet - 0.78 * h
    for side in (-1, 1):
        c.rect(
            x + side * 0.07 * h - 0.025 * h,
            feet - 0.17 * h,
            x + side * 0.07 * h + 0.025 * h,
            feet,
            SKIN_LIGHT,
        )
    shoulder = feet - 0.6 * h
    if arms_up:
        for side in (-1, 1):
            c.line(
                [(x + side * 0.06 * h, shoulder), (x + side * 0.24 * h, shoulder - 0.28 * h)],
                SKIN_LIGHT,
                0.04 * h,
            )
    else:
        for side in (-1, 1):
            c.line(
                [(x + side * 0.06 * h, shoulder), (x + side * 0.2 * h, feet - 0.34 * h)],
                SKIN_LIGHT,
                0.04 * h,
            )
    c.poly(
        [(x - 0.23 * h, feet - 0.15 * h), (x + 0.23 * h, feet - 0.15 * h), (x, feet - 0.64 * h)],
        (142, 92, 207),
    )
    c.chord(x, head_y - 0.01 * h, head_r * 1.18, head_r * 1.15, 180, 360, (110, 66, 38))
    c.rect(
        x - head_r * 1.18, head_y - 0.01 * h, x - head_r * 0.8, head_y + 0.6 * head_r, (110, 66, 38)
    )
    c.rect(
        x + head_r * 0.8, head_y - 0.01 * h, x + head_r * 1.18, head_y + 0.6 * head_r, (110, 66, 38)
    )
    c.circle(x, head_y + 0.03 * h, head_r * 0.92, SKIN_LIGHT)
    c.chord(x, head_y - 0.02 * h, head_r * 0.95, head_r * 0.75, 190, 350, (110, 66, 38))
    face(c, x, head_y + 0.05 * h, head_r * 0.9, mood)
    if lantern:
        lx, ly = x + 0.22 * h, feet - 0.3 * h
        c.circle(lx, ly, 0.16 * h, (120, 110, 60))  # glow
        c.circle(lx, ly, 0.1 * h, (200, 180, 80))
        c.rect(lx - 0.04 * h, ly - 0.06 * h, lx + 0.04 * h, ly + 0.06 * h, (255, 226, 110))
        c.line([(lx - 0.04 * h, ly - 0.08 * h), (lx + 0.04 * h, ly - 0.08 * h)], INK, 0.015 * h)


def fox(
    c: Canvas, x: float, feet: float, h: float, mood: str, facing: int = 1, leaping: bool = False
) -> None:
    """Pip: small orange fox, white-tipped tail (h = height to ear tips)."""
    orange, dark = (232, 119, 46), (90, 50, 30)
    body_y = feet - 0.32 * h - (0.12 * h if leaping else 0.0)
    tail_x = x - facing * 0.42 * h
    c.poly(
        [
            (x - facing * 0.2 * h, body_y),
            (tail_x, body_y - 0.28 * h),
            (tail_x - facing * 0.12 * h, body_y - 0.05 * h),
        ],
        orange,
    )
    c.circle(tail_x - facing * 0.05 * h, body_y - 0.2 * h, 0.07 * h, WHITE)
    for offset in (-0.14, 0.14):
        lx = x + offset * h
        c.line(
            [
                (lx, body_y),
                (lx + (facing * 0.08 * h if leaping else 0), feet - (0.1 * h if leaping else 0)),
            ],
            dark,
            0.05 * h,
        )
    c.ellipse(x, body_y, 0.26 * h, 0.15 * h, orange)
    hx, hy = x + facing * 0.24 * h, body_y - 0.24 * h
    c.poly(
        [(hx - 0.12 * h, hy - 0.06 * h), (hx - 0.08 * h, hy - 0.3 * h), (hx, hy - 0.1 * h)], orange
    )
    c.poly(
        [(hx + 0.12 * h, hy - 0.06 * h), (hx + 0.08 * h, hy - 0.3 * h), (hx, hy - 0.1 * h)], orange
    )
    c.circle(hx, hy, 0.14 * h, orange)
    c.poly(
        [
            (hx + facing * 0.08 * h, hy - 0.04 * h),
            (hx + facing * 0.26 * h, hy + 0.04 * h),
            (hx + facing * 0.08 * h, hy + 0.1 * h),
        ],
        WHITE,
    )
    c.circle(hx + facing * 0.25 * h, hy + 0.04 * h, 0.025 * h, INK)
    face(c, hx, hy, 0.13 * h, mood, dx=facing * 0.02 * h)


def moon(c: Canvas, x: float, y: float, r: float, mood: str, *, dim: bool = False) -> None:
    """The Moon: round, pale yellow, with a face."""
    if not dim:
        c.circle(x, y, r * 1.35, (70, 80, 120))
        c.circle(x, y, r * 1.17, (110, 115, 140))
    c.circle(x, y, r, (196, 184, 110) if dim else (247, 230, 128))
    crater = (180, 168, 96) if dim else (228, 210, 110)
    for ox, oy, cr in ((-0.45, -0.4, 0.14), (0.5, -0.3, 0.1), (0.42, 0.48, 0.12)):
        c.circle(x + ox * r, y + oy * r, cr * r, crater)
    face(c, x, y, r * 0.7, mood)


def boy(
    c: Canvas,
    x: float,
    feet: float,
    h: float,
    mood: str,
    *,
    arm_to: tuple[float, float] | None = None,
) -> None:
    """Omar: short black hair, blue shirt, brown shorts."""
    for side in (-1, 1):
        c.rect(
            x + side * 0.07 * h - 0.03 * h,
            feet - 0.25 * h,
            x + side * 0.07 * h + 0.03 * h,
            feet,
            SKIN_DARK,
        )
    c.rect(x - 0.15 * h, feet - 0.38 * h, x + 0.15 * h, feet - 0.22 * h, (120, 84, 50))
    c.rect(x - 0.17 * h, feet - 0.66 * h, x + 0.17 * h, feet - 0.36 * h, (50, 110, 200))
    shoulder = (x + 0.15 * h, feet - 0.62 * h)
    c.line([(x - 0.15 * h, feet - 0.62 * h), (x - 0.24 * h, feet - 0.4 * h)], SKIN_DARK, 0.05 * h)
    c.line([shoulder, arm_to or (x + 0.25 * h, feet - 0.4 * h)], SKIN_DARK, 0.05 * h)
    head_y = feet - 0.8 * h
    c.circle(x, head_y, 0.15 * h, SKIN_DARK)
    c.chord(x, head_y - 0.01 * h, 0.16 * h, 0.15 * h, 180, 360, (25, 20, 20))
    face(c, x, head_y + 0.04 * h, 0.13 * h, mood)


def grandma(
    c: Canvas,
    x: float,
    feet: float,
    h: float,
    mood: str,
    *,
    arm_to: tuple[float, float] | None = None,
) -> None:
    """Grandma Ada: grey bun, round glasses, green dress."""
    for side in (-1, 1):
        c.rect(
            x + side * 0.06 * h - 0.025 * h,
            feet - 0.12 * h,
            x + side * 0.06 * h + 0.025 * h,
            feet,
            SKIN_MID,
        )
    c.poly(
        [
            (x - 0.2 * h, feet - 0.1 * h),
            (x + 0.2 * h, feet - 0.1 * h),
            (x + 0.12 * h, feet - 0.66 * h),
            (x - 0.12 * h, feet - 0.66 * h),
        ],
        (70, 140, 90),
    )
    c.line([(x - 0.12 * h, feet - 0.62 * h), (x - 0.2 * h, feet - 0.36 * h)], SKIN_MID, 0.045 * h)
    c.line(
        [(x + 0.12 * h, feet - 0.62 * h), arm_to or (x + 0.2 * h, feet - 0.36 * h)],
        SKIN_MID,
        0.045 * h,
    )
    head_y = feet - 0.8 * h
    c.circle(x, head_y - 0.17 * h, 0.07 * h, (190, 190, 195))  # bun
    c.circle(x, head_y, 0.14 * h, SKIN_MID)
    c.chord(x, head_y - 0.02 * h, 0.15 * h, 0.12 * h, 180, 360, (190, 190, 195))
    face(c, x, head_y + 0.03 * h, 0.12 * h, mood)
    for side in (-1, 1):
        c.circle(
            x + side * 0.045 * h, head_y + 0.02 * h, 0.035 * h, None, outline=INK, width=0.008 * h
        )


def turtle(c: Canvas, x: float, feet: float, h: float, mood: str, facing: int = 1) -> None:
    """Tilly: green patterned shell, pink bow (h = shell height)."""
    skin, shell, pattern = (156, 207, 106), (79, 154, 74), (50, 110, 50)
    for offset in (-0.5, 0.4):
        c.ellipse(x + offset * h, feet - 0.08 * h, 0.12 * h, 0.1 * h, skin)
    c.chord(x, feet - 0.1 * h, 0.75 * h, 0.9 * h, 180, 360, shell)
    for ox in (-0.35, 0.0, 0.35):
        c.circle(x + ox * h, feet - 0.45 * h, 0.14 * h, None, outline=pattern, width=0.03 * h)
    c.rect(x - 0.75 * h, feet - 0.14 * h, x + 0.75 * h, feet - 0.08 * h, pattern)
    hx, hy = x + facing * 0.85 * h, feet - 0.42 * h
    c.circle(hx, hy, 0.24 * h, skin)
    face(c, hx, hy, 0.22 * h, mood, dx=facing * 0.03 * h)
    bx, by = hx - facing * 0.05 * h, hy - 0.25 * h
    c.poly(
        [(bx, by), (bx - 0.14 * h, by - 0.09 * h), (bx - 0.14 * h, by + 0.09 * h)], (236, 120, 170)
    )
    c.poly(
        [(bx, by), (bx + 0.14 * h, by - 0.09 * h), (bx + 0.14 * h, by + 0.09 * h)], (236, 120, 170)
    )
    c.circle(bx, by, 0.04 * h, (210, 80, 140))


def frog(c: Canvas, x: float, feet: float, h: float, mood: str, *, jumping: bool = False) -> None:
    """Bo: round green frog with big eyes (h = body height)."""
    green, dark = (92, 191, 74), (60, 140, 50)
    body_y = feet - 0.45 * h
    if jumping:
        for side in (-1, 1):
            c.line(
                [(x + side * 0.3 * h, body_y + 0.2 * h), (x + side * 0.55 * h, feet + 0.05 * h)],
                dark,
                0.12 * h,
            )
    else:
        for side in (-1, 1):
            c.ellipse(x + side * 0.42 * h, feet - 0.1 * h, 0.22 * h, 0.1 * h, dark)
    c.ellipse(x, body_y, 0.5 * h, 0.42 * h, green)
    c.ellipse(x, body_y + 0.15 * h, 0.3 * h, 0.2 * h, (190, 230, 150))
    for side in (-1, 1):
        c.circle(x + side * 0.25 * h, body_y - 0.4 * h, 0.16 * h, green)
        c.circle(x + side * 0.25 * h, body_y - 0.42 * h, 0.1 * h, WHITE)
        c.circle(x + side * 0.25 * h, body_y - 0.42 * h, 0.05 * h, INK)
    if mood == "happy":
        c.arc(x, body_y - 0.12 * h, 0.3 * h, 30, 150, INK, 0.04 * h)
    elif mood == "sad":
        c.arc(x, body_y + 0.12 * h, 0.2 * h, 215, 325, INK, 0.04 * h)
        c.ellipse(x + 0.3 * h, body_y - 0.22 * h, 0.03 * h, 0.05 * h, (110, 170, 230))
    else:
        c.line(
            [(x - 0.18 * h, body_y - 0.05 * h), (x + 0.18 * h, body_y - 0.05 * h)], INK, 0.04 * h
        )


# -- props and scenery -----------------------------------------------------------------------


def stars(c: Canvas, seed: int, count: int, y_max: float) -> None:
    # A fixed linear-congruential sequence keeps star fields identical across runs and platforms.
    state = seed
    for _ in range(count):
        state = (1103515245 * state + 12345) % (2**31)
        x = (state % 10_000) / 10_000
        state = (1103515245 * state + 12345) % (2**31)
        y = (state % 10_000) / 10_000 * y_max
        c.circle(x, y, 0.005, (250, 245, 200))


def cloud(c: Canvas, x: float, y: float, s: float, color=(250, 250, 250)) -> None:
    for ox, oy, r in ((-0.6, 0.1, 0.45), (0.0, -0.1, 0.6), (0.6, 0.1, 0.45)):
        c.circle(x + ox * s, y + oy * s, r * s, color)
    c.rect(x - 0.6 * s, y + 0.1 * s, x + 0.6 * s, y + 0.45 * s, color)


def oak(c: Canvas, x: float, ground: float, h: float) -> None:
    c.rect(x - 0.06 * h, ground - 0.55 * h, x + 0.06 * h, ground, (96, 64, 40))
    for ox, oy, r in ((-0.25, -0.65, 0.25), (0.25, -0.65, 0.25), (0.0, -0.85, 0.3)):
        c.circle(x + ox * h, ground + oy * h, r * h, (36, 80, 50))


def pine(c: Canvas, x: float, ground: float, h: float, color=(40, 110, 60)) -> None:
    c.rect(x - 0.03 * h, ground - 0.15 * h, x + 0.03 * h, ground, (96, 64, 40))
    for i in range(3):
        top = ground - h + i * 0.25 * h
        half = (0.16 + 0.07 * i) * h
        c.poly([(x, top), (x - half, top + 0.4 * h), (x + half, top + 0.4 * h)], color)


def kite(
    c: Canvas,
    x: float,
    y: float,
    s: float,
    *,
    string_to: tuple[float, float] | None = None,
    tilt: float = 0.0,
) -> None:
    red = (214, 40, 50)

    def rot(dx: float, dy: float) -> tuple[float, float]:
        cos, sin = math.cos(tilt), math.sin(tilt)
        return x + (dx * cos - dy * sin) * s, y + (dx * sin + dy * cos) * s

    c.poly([rot(0, -1.0), rot(0.6, -0.2), rot(0, 1.0), rot(-0.6, -0.2)], red)
    c.line([rot(0, -1.0), rot(0, 1.0)], (120, 20, 30), 0.08 * s)
    c.line([rot(-0.6, -0.2), rot(0.6, -0.2)], (120, 20, 30), 0.08 * s)
    tail = [rot(0, 1.0), rot(0.3, 1.6), rot(-0.2, 2.2), rot(0.2, 2.8)]
    c.line(tail, (120, 20, 30), 0.05 * s)
    for tx, ty in tail[1:]:
        c.poly(
            [
                (tx - 0.15 * s, ty - 0.1 * s),
                (tx + 0.15 * s, ty + 0.1 * s),
                (tx + 0.15 * s, ty - 0.1 * s),
                (tx - 0.15 * s, ty + 0.1 * s),
            ],
            (250, 200, 60),
        )
    if string_to is not None:
        c.line([rot(0, 0.2), string_to], (90, 90, 90), 0.006)


def soil_rows(
    c: Canvas, top: float, *, cracked: bool, seeds: bool, sprouts: bool, squashed: bool = False
) -> None:
    c.rect(0, top, 1, 1, (150, 100, 60) if cracked else (110, 75, 45))
    for i in range(3):
        y = top + 0.06 + i * 0.1
        c.rect(0.05, y, 0.95, y + 0.035, (125, 82, 48) if cracked else (90, 60, 36))
        for j in range(7):
            x = 0.1 + j * 0.13
            if squashed and j in (2, 3, 4) and i == 1:
                c.ellipse(x, y + 0.018, 0.025, 0.008, (70, 50, 30))
            elif seeds:
                c.circle(x, y + 0.018, 0.008, (240, 220, 160))
            if sprouts:
                c.line([(x, y + 0.018), (x, y - 0.04)], (70, 160, 60), 0.006)
                c.ellipse(x - 0.015, y - 0.045, 0.017, 0.008, (90, 190, 70))
                c.ellipse(x + 0.015, y - 0.05, 0.017, 0.008, (90, 190, 70))
    if cracked:
        for x0 in (0.15, 0.5, 0.8):
            c.line(
                [
                    (x0, top + 0.3),
                    (x0 + 0.04, top + 0.34),
                    (x0 - 0.01, top + 0.38),
                    (x0 + 0.03, top + 0.42),
                ],
                (95, 60, 35),
                0.004,
            )


def sun(c: Canvas, x: float, y: float, r: float) -> None:
    for k in range(12):
        angle = k * math.pi / 6
        c.line(
            [
                (x + math.cos(angle) * r * 1.2, y + math.sin(angle) * r * 1.2),
                (x + math.cos(angle) * r * 1.6, y + math.sin(angle) * r * 1.6),
            ],
            (250, 190, 50),
            0.012,
        )
    c.circle(x, y, r, (252, 208, 70))


# -- pages -------------------------------------------------------------------------------------

NIGHT = (29, 42, 77)
NIGHT_GRASS = (40, 80, 55)
DAY = (159, 212, 245)
GRASS = (124, 195, 90)


def lena_p1(c: Canvas) -> None:
    c.rect(0, 0, 1, 1, (72, 62, 104))  # bedroom wall
    c.rect(0.2, 0.1, 0.8, 0.55, NIGHT)  # window
    stars(c, 11, 26, 0.55)
    c.rect(0, 0, 1, 0.1, (72, 62, 104))
    c.rect(0, 0.55, 1, 1, (72, 62, 104))
    c.rect(0, 0, 0.2, 1, (72, 62, 104))
    c.rect(0.8, 0, 1, 1, (72, 62, 104))
    c.line([(0.5, 0.1), (0.5, 0.55)], (120, 84, 50), 0.02)
    c.line([(0.2, 0.33), (0.8, 0.33)], (120, 84, 50), 0.02)
    c.rect(0.17, 0.55, 0.83, 0.59, (120, 84, 50))
    c.rect(0, 0.86, 1, 1, (96, 70, 60))  # floor
    c.rect(0.64, 0.7, 1.0, 0.88, (200, 90, 90))  # bed
    c.rect(0.64, 0.66, 0.76, 0.72, WHITE)
    girl(c, 0.38, 0.93, 0.42, "sad")


def lena_p2(c: Canvas) -> None:
    lena_p1_room(c)
    fox(c, 0.36, 0.53, 0.22, "neutral", facing=1)
    c.circle(0.56, 0.36, 0.015, WHITE)  # a tap mark on the glass
    girl(c, 0.62, 0.95, 0.42, "scared")


def lena_p1_room(c: Canvas) -> None:
    c.rect(0, 0, 1, 1, (72, 62, 104))
    c.rect(0.2, 0.1, 0.8, 0.55, NIGHT)
    stars(c, 11, 26, 0.55)
    c.rect(0, 0, 1, 0.1, (72, 62, 104))
    c.rect(0, 0, 0.2, 1, (72, 62, 104))
    c.rect(0.8, 0, 1, 1, (72, 62, 104))
    c.rect(0.2, 0.46, 0.8, 0.55, NIGHT_GRASS)  # the garden seen through the window
    c.line([(0.2, 0.1), (0.8, 0.1), (0.8, 0.55), (0.2, 0.55), (0.2, 0.1)], (120, 84, 50), 0.02)
    c.rect(0.17, 0.55, 0.83, 0.59, (120, 84, 50))
    c.rect(0, 0.59, 1, 0.86, (72, 62, 104))
    c.rect(0, 0.86, 1, 1, (96, 70, 60))


def lena_p3(c: Canvas) -> None:
    c.rect(0, 0, 1, 1, NIGHT)
    stars(c, 23, 30, 0.5)
    c.ellipse(0.7, 0.72, 0.5, 0.35, (30, 60, 45))  # Tall Hill
    c.rect(0, 0.75, 1, 1, NIGHT_GRASS)
    for x in (0.1, 0.3, 0.55, 0.85):
        c.line([(x, 0.9), (x + 0.01, 0.86)], (70, 120, 80), 0.006)
    girl(c, 0.35, 0.93, 0.4, "scared", lantern=True)
    fox(c, 0.66, 0.93, 0.2, "neutral", facing=1, leaping=True)


def lena_p4(c: Canvas) -> None:
    c.rect(0, 0, 1, 1, NIGHT)
    stars(c, 37, 22, 0.45)
    c.rect(0, 0.78, 1, 1, NIGHT_GRASS)
    oak(c, 0.5, 0.8, 0.75)
    moon(c, 0.5, 0.3, 0.11, "angry", dim=True)
    for points in (
        ((0.33, 0.22), (0.5, 0.3), (0.66, 0.2)),
        ((0.36, 0.4), (0.52, 0.33), (0.64, 0.42)),
    ):
        c.line(list(points), (96, 64, 40), 0.018)
    girl(c, 0.18, 0.95, 0.3, "scared", lantern=True)
    fox(c, 0.82, 0.95, 0.16, "neutral", facing=-1)


def lena_p5(c: Canvas) -> None:
    c.rect(0, 0, 1, 1, NIGHT)
    stars(c, 41, 40, 0.6)
    moon(c, 0.5, 0.24, 0.13, "happy")
    c.ellipse(0.5, 0.98, 0.75, 0.3, (30, 60, 45))  # hilltop
    girl(c, 0.4, 0.8, 0.34, "happy", arms_up=True)
    fox(c, 0.63, 0.8, 0.18, "happy", facing=-1)


def omar_scene(c: Canvas) -> None:
    c.rect(0, 0, 1, 1, DAY)
    c.ellipse(0.3, 0.95, 0.8, 0.4, GRASS)
    c.ellipse(0.9, 1.0, 0.5, 0.3, (104, 175, 80))


def omar_p1(c: Canvas) -> None:
    omar_scene(c)
    cloud(c, 0.25, 0.18, 0.07)
    cloud(c, 0.75, 0.26, 0.06)
    for y in (0.35, 0.42):
        c.line([(0.55, y), (0.75, y - 0.02), (0.9, y)], WHITE, 0.006)  # wind
    grandma(c, 0.3, 0.9, 0.45, "happy")
    boy(c, 0.58, 0.9, 0.36, "happy", arm_to=(0.72, 0.62))
    kite(c, 0.74, 0.58, 0.05, tilt=0.3)


def omar_p2(c: Canvas) -> None:
    omar_scene(c)
    cloud(c, 0.3, 0.2, 0.08)
    cloud(c, 0.82, 0.12, 0.06)
    kite(c, 0.7, 0.22, 0.06, string_to=(0.58, 0.56), tilt=-0.3)
    grandma(c, 0.28, 0.9, 0.45, "happy")
    boy(c, 0.52, 0.9, 0.36, "happy", arm_to=(0.58, 0.56))


def omar_p3(c: Canvas) -> None:
    omar_scene(c)
    cloud(c, 0.2, 0.15, 0.06)
    for x, h in ((0.72, 0.3), (0.82, 0.38), (0.93, 0.32)):
        pine(c, x, 0.72, h)
    kite(c, 0.86, 0.18, 0.03, tilt=0.8)
    grandma(c, 0.25, 0.9, 0.45, "neutral")
    boy(c, 0.48, 0.9, 0.36, "sad", arm_to=(0.6, 0.6))
    c.line([(0.6, 0.6), (0.63, 0.66), (0.61, 0.7)], (90, 90, 90), 0.004)  # the snapped string


def omar_p4(c: Canvas) -> None:
    omar_scene(c)
    cloud(c, 0.2, 0.15, 0.06)
    pine(c, 0.72, 0.86, 0.7)
    kite(c, 0.66, 0.4, 0.04, tilt=0.5)
    grandma(c, 0.34, 0.9, 0.45, "happy", arm_to=(0.5, 0.42))
    boy(c, 0.16, 0.92, 0.34, "neutral")


def tilly_scene(
    c: Canvas, *, sky, cracked: bool, seeds: bool, sprouts: bool, squashed=False
) -> None:
    c.rect(0, 0, 1, 1, sky)
    soil_rows(c, 0.62, cracked=cracked, seeds=seeds, sprouts=sprouts, squashed=squashed)


def tilly_p1(c: Canvas) -> None:
    tilly_scene(c, sky=(251, 238, 203), cracked=True, seeds=True, sprouts=False)
    sun(c, 0.82, 0.18, 0.08)
    turtle(c, 0.3, 0.62, 0.21, "neutral")
    c.rect(0.62, 0.52, 0.7, 0.62, (120, 140, 170))  # an empty watering can
    c.line([(0.7, 0.55), (0.76, 0.5)], (120, 140, 170), 0.012)


def tilly_p2(c: Canvas) -> None:
    tilly_scene(c, sky=(251, 238, 203), cracked=True, seeds=True, sprouts=False)
    sun(c, 0.82, 0.18, 0.08)
    frog(c, 0.62, 0.5, 0.17, "happy", jumping=True)
    for x, y in ((0.48, 0.66), (0.62, 0.68), (0.55, 0.7)):
        c.circle(x, y, 0.015, (90, 60, 36))  # mud splashes
    turtle(c, 0.22, 0.62, 0.21, "angry")


def tilly_p3(c: Canvas) -> None:
    tilly_scene(c, sky=(251, 238, 203), cracked=True, seeds=True, sprouts=False, squashed=True)
    sun(c, 0.82, 0.18, 0.08)
    frog(c, 0.7, 0.62, 0.17, "sad")
    turtle(c, 0.25, 0.62, 0.21, "neutral")


def tilly_p4(c: Canvas) -> None:
    tilly_scene(c, sky=(159, 179, 200), cracked=False, seeds=False, sprouts=True)
    cloud(c, 0.28, 0.14, 0.08, (120, 130, 145))
    cloud(c, 0.74, 0.1, 0.09, (120, 130, 145))
    for k in range(24):
        x = 0.04 + (k * 0.37) % 0.92
        y = 0.25 + (k * 0.23) % 0.3
        c.line([(x, y), (x - 0.01, y + 0.04)], (80, 120, 200), 0.005)
    turtle(c, 0.3, 0.62, 0.21, "happy")
    frog(c, 0.74, 0.62, 0.16, "happy")


# =============================================================================================
# The three books
# =============================================================================================

BOOKS: tuple[BookSpec, ...] = (
    BookSpec(
        book="lena-and-the-lost-moon",
        title="Lena and the Lost Moon",
        metadata={
            "genre": "Fantasy",
            "topic": "A girl and a fox help the fallen moon return to the night sky",
            "style": "flat shapes, night colours",
            "narrative_tense": "Past",
            "narrative_perspective": "Third-person omniscient",
            "characters": [
                _person(
                    "Lena",
                    "female",
                    "6-8",
                    "human",
                    "protagonist",
                    ("curious", "gentle", "a little shy"),
                    "girl with a brown bob and a purple dress, often carrying a yellow lantern",
                ),
                _person(
                    "Pip",
                    "male",
                    "",
                    "fox",
                    "helper",
                    ("quick", "cheerful", "brave"),
                    "small orange fox with a white-tipped tail",
                ),
                _person(
                    "The Moon",
                    "male",
                    "",
                    "moon",
                    "the lost one",
                    ("proud", "grumpy when stuck", "warm-hearted"),
                    "round pale-yellow moon with craters and a friendly face",
                ),
            ],
        },
        pages=(
            PageSpec(
                "Lena looked out of her bedroom window. The night sky was dark and empty, and the "
                "round moon was nowhere to be seen.",
                lena_p1,
            ),
            PageSpec(
                'Pip the fox tapped on the glass with his paw. "The moon fell behind Tall Hill, '
                "come "
                'quick!" he whispered, his tail swishing.',
                lena_p2,
                Speech("Pip", "neutral", "fast", "high", "male"),
                (
                    _character(
                        "Pip",
                        "urgent",
                        "tell Lena the moon has fallen and ask her to hurry",
                        "taps on the window glass with his paw",
                        "fully visible outside the window",
                    ),
                    _character(
                        "Lena",
                        "surprised",
                        "stays silent",
                        "turns toward the window",
                        "fully visible inside the room",
                    ),
                ),
                "Lena's dark bedroom at night; a small orange fox peers through the window; "
                "stars but "
                "no moon",
                "Introduce Pip at the window and have him urgently tell Lena where the moon went.",
                "soft tapping on glass, crickets chirping outside",
            ),
            PageSpec(
                "They hurried across the wet grass toward Tall Hill, and Lena's lantern wobbled. "
                '"I am scared of the dark," Lena said softly.',
                lena_p3,
                Speech("Lena", "sad", "slow", "normal", "female"),
                (
                    _character(
                        "Lena",
                        "scared and uneasy",
                        "admit quietly that she is afraid",
                        "walks toward the hill holding a glowing lantern",
                        "fully visible",
                    ),
                    _character(
                        "Pip",
                        "determined",
                        "stays silent",
                        "bounds ahead through the grass",
                        "fully visible",
                    ),
                ),
                "a dark meadow at night with a large hill behind; lantern light on wet grass",
                "Show the walk to Tall Hill and let Lena confess her fear of the dark.",
                "wet grass swishing, a distant owl hooting",
            ),
            PageSpec(
                "Behind the hill the moon lay tangled in an old oak tree, glowing weakly. "
                '"Who tied me up in these branches?" the moon grumbled.',
                lena_p4,
                Speech("The Moon", "angry", "normal", "low", "male"),
                (
                    _character(
                        "The Moon",
                        "grumpy and annoyed",
                        "complain about being stuck",
                        "hangs caught in the oak branches, glowing dimly",
                        "fully visible",
                    ),
                    _character(
                        "Lena",
                        "amazed",
                        "stays silent",
                        "looks up at the tree",
                        "small, at the left",
                    ),
                    _character(
                        "Pip",
                        "curious",
                        "stays silent",
                        "sniffs at the roots",
                        "small, at the right",
                    ),
                ),
                "behind Tall Hill: a big old oak with the dim moon caught in its branches",
                "Reveal the moon stuck in the oak tree and let it grumble about the branches.",
                "creaking branches, a low night wind",
            ),
            PageSpec(
                "Lena and Pip pushed the moon gently back up into the sky. "
                '"Thank you, my brave friends!" the moon sang, shining bright again.',
                lena_p5,
                Speech("The Moon", "happy", "normal", "normal", "male"),
                (
                    _character(
                        "The Moon",
                        "joyful and grateful",
                        "thank Lena and Pip warmly",
                        "rises high and shines brightly",
                        "fully visible in the sky",
                    ),
                    _character(
                        "Lena",
                        "proud",
                        "stays silent",
                        "raises both arms toward the sky",
                        "fully visible on the hilltop",
                    ),
                    _character("Pip", "happy", "stays silent", "wags his tail", "fully visible"),
                ),
                "the top of Tall Hill under a starry sky with a bright, smiling moon",
                "Have the friends return the moon to the sky and let the moon thank them.",
                "a gentle breeze, a soft chiming hum from the glowing moon",
            ),
        ),
    ),
    BookSpec(
        book="omar-and-the-red-kite",
        title="Omar and the Red Kite",
        metadata={
            "genre": "Realistic fiction",
            "topic": "A boy loses his kite in the wind and learns patience from his grandmother",
            "style": "flat shapes, bright daylight colours",
            "narrative_tense": "Past",
            "narrative_perspective": "Third-person limited",
            "characters": [
                _person(
                    "Omar",
                    "male",
                    8,
                    "human",
                    "protagonist",
                    ("excited", "impatient", "loving"),
                    "boy with short black hair, a blue shirt and brown shorts",
                ),
                _person(
                    "Grandma Ada",
                    "female",
                    "70-75",
                    "human",
                    "mentor",
                    ("calm", "wise", "kind"),
                    "grandmother with a grey bun, round glasses and a green dress",
                ),
            ],
        },
        pages=(
            PageSpec(
                "Omar and Grandma Ada climbed the windy hill with a bright red kite that Omar had "
                "painted all by himself.",
                omar_p1,
            ),
            PageSpec(
                "The wind tugged at the string and the kite leapt into the air. "
                '"Look, Grandma, it is dancing with the clouds!" Omar shouted.',
                omar_p2,
                Speech("Omar", "happy", "fast", "high", "male"),
                (
                    _character(
                        "Omar",
                        "thrilled",
                        "share his joy with his grandmother",
                        "holds the kite string with both hands",
                        "fully visible",
                    ),
                    _character(
                        "Grandma Ada",
                        "pleased",
                        "stays silent",
                        "smiles and watches the kite",
                        "fully visible",
                    ),
                ),
                "a grassy hilltop on a bright windy day; the red kite high among white clouds",
                "Launch the kite and let Omar shout with delight.",
                "wind gusts, the flapping of the kite",
            ),
            PageSpec(
                "Suddenly the string snapped, and the red kite drifted away over the pine trees. "
                '"My kite is gone forever," Omar sobbed.',
                omar_p3,
                Speech("Omar", "sad", "slow", "low", "male"),
                (
                    _character(
                        "Omar",
                        "heartbroken",
                        "mourn the lost kite",
                        "holds the broken string",
                        "fully visible",
                    ),
                    _character(
                        "Grandma Ada",
                        "concerned",
                        "stays silent",
                        "stands beside Omar",
                        "fully visible",
                    ),
                ),
                "the hilltop with a row of pine trees; the kite is a tiny red shape "
                "in the distance",
                "Break the string, send the kite away and show Omar's sorrow.",
                "rushing wind, rustling pine needles",
            ),
            PageSpec(
                "Grandma Ada pointed at a tall pine, where the red kite hung safely on a branch. "
                '"Kites come home to those who wait," she said calmly.',
                omar_p4,
                Speech("Grandma Ada", "neutral", "slow", "low", "female"),
                (
                    _character(
                        "Grandma Ada",
                        "calm and reassuring",
                        "comfort Omar with a gentle saying",
                        "points at the kite in the pine tree",
                        "fully visible",
                    ),
                    _character(
                        "Omar", "hopeful", "stays silent", "looks up at the tree", "fully visible"
                    ),
                ),
                "a tall pine tree on the hill with the red kite caught on a branch",
                "Have Grandma Ada find the kite and calmly share a lesson about patience.",
                "a light breeze, birdsong",
            ),
        ),
    ),
    BookSpec(
        book="tilly-and-the-rain-garden",
        title="Tilly and the Rain Garden",
        metadata={
            "genre": "Animal fable",
            "topic": (
                "A turtle and a frog quarrel over a garden, make up, and see it grow after rain"
            ),
            "style": "flat shapes, soft greens and browns",
            "narrative_tense": "Past",
            "narrative_perspective": "Third-person omniscient",
            "characters": [
                _person(
                    "Tilly",
                    "female",
                    "",
                    "turtle",
                    "protagonist",
                    ("hard-working", "quick-tempered", "forgiving"),
                    "small turtle with a green patterned shell and a pink bow",
                ),
                _person(
                    "Bo",
                    "male",
                    "",
                    "frog",
                    "friend",
                    ("playful", "clumsy", "sorry when wrong"),
                    "round green frog with big eyes",
                ),
            ],
        },
        pages=(
            PageSpec(
                "Tilly the turtle planted seeds in her little garden, but the sun was hot and "
                "the soil "
                "was dry and cracked.",
                tilly_p1,
            ),
            PageSpec(
                "Bo the frog came hopping right through the seed rows, splashing mud. "
                '"Stop jumping on my seeds, Bo!" Tilly shouted crossly.',
                tilly_p2,
                Speech("Tilly", "angry", "fast", "high", "female"),
                (
                    _character(
                        "Tilly",
                        "angry",
                        "tell Bo to stop at once",
                        "stamps her foot",
                        "fully visible at the left",
                    ),
                    _character(
                        "Bo",
                        "carefree",
                        "stays silent",
                        "leaps over the seed rows",
                        "fully visible, mid-air",
                    ),
                ),
                "the dry, cracked garden under a hot sun; mud flying from the rows",
                "Let Bo hop through the garden and Tilly shout at him.",
                "splashing mud, a frog's croak",
            ),
            PageSpec(
                "Bo looked at the squashed seeds and hung his head. "
                '"I am sorry, Tilly, I will help you fix it," he said in a small voice.',
                tilly_p3,
                Speech("Bo", "sad", "slow", "normal", "male"),
                (
                    _character(
                        "Bo",
                        "ashamed and sorry",
                        "apologise and offer to help",
                        "hangs his head beside the squashed seeds",
                        "fully visible",
                    ),
                    _character(
                        "Tilly",
                        "still upset",
                        "stays silent",
                        "looks at the ruined row",
                        "fully visible",
                    ),
                ),
                "the same dry garden; one row of seeds is flattened",
                "Show Bo's regret and have him apologise.",
                "buzzing insects in the heat",
            ),
            PageSpec(
                "Grey clouds rolled in and rain soaked the garden, and soon tiny green sprouts "
                "peeked "
                'out. "Our garden is growing!" Tilly laughed.',
                tilly_p4,
                Speech("Tilly", "happy", "normal", "high", "female"),
                (
                    _character(
                        "Tilly",
                        "delighted",
                        "celebrate the sprouts with Bo",
                        "laughs among the new sprouts",
                        "fully visible",
                    ),
                    _character(
                        "Bo", "happy", "stays silent", "sits in the rain, smiling", "fully visible"
                    ),
                ),
                "the garden in the rain under grey clouds; rows of green sprouts",
                "Bring the rain, make the sprouts appear and let Tilly laugh with joy.",
                "steady rain pattering on leaves and soil",
            ),
        ),
    ),
)

# =============================================================================================
# Writing
# =============================================================================================

QUOTE = re.compile(r'"([^"]+)"')


def page_key(number: int) -> str:
    return f"page_{number:03d}"


def _utterance(text: str) -> str:
    quotes = QUOTE.findall(text)
    if len(quotes) != 1:
        raise ValueError(f"a next-page narration needs exactly one quoted utterance: {text!r}")
    # Keep the spoken words only: trailing commas belong to the narration, not the speech.
    return quotes[0].rstrip(",")


def build_rows() -> list[dict[str, Any]]:
    """The parquet rows of the demo, in candidate-index order (paths root-relative)."""
    rows = []
    for spec in BOOKS:
        for number in range(1, len(spec.pages)):
            current, nxt = spec.pages[number - 1], spec.pages[number]
            from_key, to_key = page_key(number), page_key(number + 1)
            assert nxt.speech is not None, (spec.book, to_key)
            rel = f"{SOURCE}/{spec.book}"
            row = {
                "id": expected_id(SOURCE, spec.book, from_key, to_key),
                "source": SOURCE,
                "book": spec.book,
                "from_key": from_key,
                "to_key": to_key,
                "current_image": f"images/{rel}/{from_key}.png",
                "current_text": current.text,
                "current_text_path": f"texts/{rel}/{from_key}.txt",
                "next_image": f"images/{rel}/{to_key}.png",
                "next_text": nxt.text,
                "next_text_path": f"texts/{rel}/{to_key}.txt",
                **{
                    name: spec.metadata[name]
                    for name in (
                        "genre",
                        "topic",
                        "style",
                        "narrative_tense",
                        "narrative_perspective",
                    )
                },
                "scene": nxt.scene,
                "text_instruction": nxt.text_instruction,
                "ambient_sound": nxt.ambient_sound,
                "speech_utterance": _utterance(nxt.text),
                "speech_speaker": nxt.speech.speaker,
                "speech_emotion": nxt.speech.emotion,
                "speech_speed": nxt.speech.speed,
                "speech_pitch": nxt.speech.pitch,
                "speech_gender": nxt.speech.gender,
                "condition_characters": json.dumps(list(nxt.characters), ensure_ascii=False),
                "book_characters": json.dumps(spec.metadata["characters"], ensure_ascii=False),
                "sample_path": f"samples/{rel}/{from_key}__{to_key}.json",
                "metadata_path": f"metadata/{rel}.json",
            }
            rows.append({name: row[name] for name in REQUIRED_COLUMNS})
    _check_demo(rows)
    return rows


def _check_demo(rows: list[dict[str, Any]]) -> None:
    """The promises the demo makes: narration length, label coverage, speakers in the conditions."""
    for row in rows:
        for name in ("current_text", "next_text"):
            if not 80 <= len(row[name]) <= 160:
                raise ValueError(
                    f"{row['id']}: {name} has {len(row[name])} characters (want 80-160)"
                )
        names = [c["name"] for c in json.loads(row["condition_characters"])]
        if row["speech_speaker"] not in names:
            raise ValueError(
                f"{row['id']}: speaker {row['speech_speaker']!r} not in the conditions"
            )
    for column, allowed in LABEL_COLUMNS.items():
        seen = {row[column] for row in rows}
        if seen != set(allowed):
            raise ValueError(f"{column} covers {sorted(seen)}, want {sorted(allowed)}")


def _write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _write_json(path: Path, data: Any) -> None:
    _write_text(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


README = f"""# omnistory_core demo dataset

Ten story transitions (page *i* -> page *i+1*) from three short children's stories written for
omnistory_core, in the same layout and schema as the Omni-StoryBench release:

* `data/omni_storybench.parquet`: one row per transition; row *i* is candidate index *i*;
* `samples/{SOURCE}/<book>/<from>__<to>.json`: the same row in the nested per-sample shape;
* `metadata/{SOURCE}/<book>.json`: title, licence, attribution and book metadata;
* `images/{SOURCE}/<book>/<page>.png`: {IMAGE_SIZE}x{IMAGE_SIZE} illustrations drawn from flat
  shapes;
* `texts/{SOURCE}/<book>/<page>.txt`: the page narration.

Books: "Lena and the Lost Moon" (4 transitions), "Omar and the Red Kite" (3),
"Tilly and the Rain Garden" (3). Every next-page narration holds exactly one quoted utterance, which
is the target speech; the targets cover every emotion, speed, pitch and gender label.

Generated by `tools/make_demo_dataset.py` (deterministic); edit the script, not these files.

## Licence

Texts and illustrations: Copyright omnistory_core contributors, licensed under the Creative Commons
Attribution 4.0 International licence ({LICENSE}); see `LICENSE.md`.
Attribution: "{ATTRIBUTION}".
"""

LICENSE_TEXT = f"""# Licence of the demo dataset

The stories, page texts, annotations and illustrations in this folder were created by the
{ATTRIBUTION} and are licensed under the Creative Commons Attribution 4.0 International
licence (CC BY 4.0).

You may share and adapt them for any purpose, including commercially, as long as you give
appropriate credit ("{ATTRIBUTION}"), link to the licence, and indicate if changes were made.

Full legal code: https://creativecommons.org/licenses/by/4.0/legalcode
"""


def write_demo(out: Path) -> list[dict[str, Any]]:
    """(Re)write the demo dataset under ``out``; returns its rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = build_rows()
    out.mkdir(parents=True, exist_ok=True)
    for name in GENERATED_DIRS:
        if (out / name).exists():
            shutil.rmtree(out / name)
    for spec in BOOKS:
        rel = f"{SOURCE}/{spec.book}"
        _write_json(
            out / "metadata" / f"{rel}.json",
            {
                "source": SOURCE,
                "book": spec.book,
                "title": spec.title,
                "license": LICENSE,
                "attribution": ATTRIBUTION,
                "metadata": spec.metadata,
            },
        )
        for number, page in enumerate(spec.pages, start=1):
            key = page_key(number)
            _write_text(out / "texts" / rel / f"{key}.txt", page.text + "\n")
            canvas = Canvas((255, 255, 255))
            page.draw(canvas)
            image_path = out / "images" / rel / f"{key}.png"
            image_path.parent.mkdir(parents=True, exist_ok=True)
            canvas.finish().save(image_path, format="PNG", optimize=True)
    for row in rows:
        _write_json(out / row["sample_path"], sample_view(row))
    schema = pa.schema([(name, pa.string()) for name in REQUIRED_COLUMNS])
    table = pa.Table.from_pylist(rows, schema=schema)
    (out / PARQUET_RELATIVE_PATH).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out / PARQUET_RELATIVE_PATH, compression="zstd")
    _write_text(out / "README.md", README)
    _write_text(out / "LICENSE.md", LICENSE_TEXT)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    args = parser.parse_args(argv)
    rows = write_demo(args.out)
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {len(rows)} transitions to {args.out} ({total / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
