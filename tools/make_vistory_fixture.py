#!/usr/bin/env python3
"""Write the ViStoryBench offline fixture (``omnistory_vistorybench/fixture/``) deterministically.

Two short stories written for this project in the official ViStory layout, with method outputs
in both official output layouts::

    ViStory/01/story.json  ViStory/01/image/<CharacterKey>/00.jpg ...   (01 is in the Lite split)
    ViStory/02/story.json  ViStory/02/image/<CharacterKey>/00.jpg ...   (02 is not)
    outputs/copy_paste/base/en/20250101_120000/<story>/...               (layout A)
    outputs/storyboard/ch/base/20250102_090000/<story>/...               (layout B)

Pixels come only from public-domain / CC0 photographs that scikit-image ships (``skimage.data``)
and from figures drawn here with PIL; none comes from ViStoryBench.  README.md and LICENSE.md in
the fixture folder list every image's source and licence, and what each file exercises.

Usage (needs scikit-image and this plugin: ``.venv/bin/pip install scikit-image`` and
``.venv/bin/pip install --no-deps -e ./plugins/omnistory-vistorybench``)::

    .venv/bin/python tools/make_vistory_fixture.py [--out DIR]

The default ``DIR`` is the package's fixture folder.  Only ``ViStory/``, ``outputs/``,
``README.md``, ``LICENSE.md`` and ``.gitignore`` under it are replaced.  Running it twice
gives identical bytes.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omnistory_vistorybench.layout import write_shot
from PIL import Image, ImageDraw

DEFAULT_OUT = (
    Path(__file__).resolve().parents[1]
    / "plugins/omnistory-vistorybench/src/omnistory_vistorybench/fixture"
)
REF_SIZE = 256
SHOT_SIZE = 256
CHAR_SIZE = 128
JPEG_QUALITY = 85
PALETTE_COLORS = 256
METHOD_A = "copy_paste"
MODE = "base"
TS_A = "20250101_120000"
TS_B = "20250102_090000"
#: the story-level timestamp subfolders of story 02 in the layout-A run (older, newer)
STORY_TS = ("20250101_115900", "20250101_120500")
METHOD_B = "storyboard"

Picture = Callable[[], Image.Image]


# --- pictures --------------------------------------------------------------------------------


def _skimage(name: str) -> Image.Image:
    import skimage.data

    array = getattr(skimage.data, name)()
    if array.dtype == bool:
        array = (array * 255).astype(np.uint8)
    return Image.fromarray(array).convert("RGB")


def _square(img: Image.Image, box: tuple[int, int, int, int] | None, size: int) -> Image.Image:
    if box is None:
        side = min(img.size)
        left, top = (img.width - side) // 2, (img.height - side) // 2
        box = (left, top, left + side, top + side)
    return img.crop(box).resize((size, size), Image.Resampling.LANCZOS)


def astronaut_face() -> Image.Image:
    return _square(_skimage("astronaut"), (110, 0, 350, 240), REF_SIZE)


def astronaut_portrait() -> Image.Image:
    return _square(_skimage("astronaut"), None, REF_SIZE)


def chelsea() -> Image.Image:
    return _square(_skimage("chelsea"), None, REF_SIZE)


def dapple() -> Image.Image:
    """The CC0 horse silhouette, recoloured: a dark horse on a green meadow."""
    mask = np.asarray(_skimage("horse").convert("L")) < 128
    canvas = np.empty((*mask.shape, 3), dtype=np.uint8)
    canvas[:] = (140, 190, 110)
    canvas[mask] = (70, 45, 30)
    # padded to a square rather than cropped, so the whole horse stays in view
    side = max(mask.shape)
    square = Image.new("RGB", (side, side), (140, 190, 110))
    square.paste(
        Image.fromarray(canvas), ((side - mask.shape[1]) // 2, (side - mask.shape[0]) // 2)
    )
    return square.resize((REF_SIZE, REF_SIZE), Image.Resampling.LANCZOS)


@dataclass(frozen=True)
class Figure:
    """A flat cartoon person (the ``unrealistic_human`` references)."""

    skin: tuple[int, int, int]
    hair: tuple[int, int, int]
    shirt: tuple[int, int, int]
    trousers: tuple[int, int, int]
    backdrop: tuple[int, int, int]
    hat: tuple[int, int, int] | None = None
    arms_up: bool = False


def cartoon(figure: Figure, size: int = REF_SIZE) -> Image.Image:
    s = size / 256
    img = Image.new("RGB", (size, size), figure.backdrop)
    draw = ImageDraw.Draw(img)

    def box(x0: float, y0: float, x1: float, y1: float) -> tuple[int, int, int, int]:
        return (round(x0 * s), round(y0 * s), round(x1 * s), round(y1 * s))

    def line(points: Sequence[tuple[float, float]], width: float) -> None:
        draw.line(
            [(round(x * s), round(y * s)) for x, y in points],
            fill=figure.skin,
            width=round(width * s),
        )

    # legs, body, arms, head (back to front)
    draw.rectangle(box(100, 170, 122, 240), fill=figure.trousers)
    draw.rectangle(box(134, 170, 156, 240), fill=figure.trousers)
    draw.rounded_rectangle(box(88, 105, 168, 180), radius=round(14 * s), fill=figure.shirt)
    if figure.arms_up:
        line([(92, 115), (55, 60)], 12)
        line([(164, 115), (201, 60)], 12)
    else:
        line([(92, 115), (62, 170)], 12)
        line([(164, 115), (194, 170)], 12)
    draw.ellipse(box(88, 30, 168, 110), fill=figure.skin)
    if figure.hat is not None:
        draw.rectangle(box(80, 38, 176, 48), fill=figure.hat)
        draw.rectangle(box(98, 12, 158, 40), fill=figure.hat)
    else:
        draw.polygon(
            [
                (round(x * s), round(y * s))
                for x, y in [
                    (88, 62),
                    (96, 30),
                    (112, 40),
                    (128, 22),
                    (144, 40),
                    (160, 30),
                    (168, 62),
                    (128, 42),
                ]
            ],
            fill=figure.hair,
        )
    draw.ellipse(box(106, 60, 118, 74), fill=(20, 20, 20))
    draw.ellipse(box(138, 60, 150, 74), fill=(20, 20, 20))
    draw.arc(
        box(108, 72, 148, 98), start=20, end=160, fill=(150, 40, 40), width=max(1, round(3 * s))
    )
    return img


PIP = Figure((250, 210, 175), (120, 75, 40), (210, 40, 40), (40, 70, 170), (235, 235, 200))
BO = Figure(
    (245, 200, 160), (0, 0, 0), (240, 200, 40), (60, 140, 70), (200, 225, 240), hat=(25, 25, 25)
)
BO_WAVING = Figure(
    BO.skin, BO.hair, BO.shirt, BO.trousers, (225, 215, 240), hat=BO.hat, arms_up=True
)


def backdrop(
    sky: tuple[int, int, int], ground: tuple[int, int, int], extra: str = ""
) -> Image.Image:
    """A flat drawn background: sky over ground, with one optional prop."""
    img = Image.new("RGB", (SHOT_SIZE, SHOT_SIZE), sky)
    draw = ImageDraw.Draw(img)
    draw.rectangle((0, 170, SHOT_SIZE, SHOT_SIZE), fill=ground)
    if extra == "trail":
        draw.line([(40, 170), (200, 20)], fill=(255, 255, 255), width=6)
    elif extra == "earth":
        draw.ellipse((150, 20, 240, 110), fill=(40, 110, 200))
    elif extra == "fog":
        for i in range(4):
            draw.ellipse((-40 + 70 * i, 100, 60 + 70 * i, 160), fill=(225, 225, 225))
    elif extra == "path":
        draw.polygon(
            [(90, SHOT_SIZE), (166, SHOT_SIZE), (140, 170), (116, 170)], fill=(190, 160, 110)
        )
    return img


def photo_backdrop(name: str) -> Image.Image:
    return _square(_skimage(name), None, SHOT_SIZE)


def copy_paste(background: Image.Image, refs: Sequence[Image.Image]) -> Image.Image:
    """The Copy-Paste baseline's idea: each onstage reference pasted, whole, onto the shot."""
    shot = background.copy()
    if not refs:
        return shot
    gap = 12
    tile = min(150, (SHOT_SIZE - gap * (len(refs) + 1)) // len(refs))
    left = (SHOT_SIZE - tile * len(refs) - gap * (len(refs) - 1)) // 2
    for i, ref in enumerate(refs):
        shot.paste(
            ref.resize((tile, tile), Image.Resampling.LANCZOS),
            (left + i * (tile + gap), SHOT_SIZE - tile - gap),
        )
    return shot


def storyboard(number: int, colours: Sequence[tuple[int, int, int]]) -> Image.Image:
    """A flat storyboard panel: a frame, one disc per onstage character, a tick per shot number."""
    img = Image.new("RGB", (SHOT_SIZE, SHOT_SIZE), (245, 240, 225))
    draw = ImageDraw.Draw(img)
    draw.rectangle((8, 8, SHOT_SIZE - 9, SHOT_SIZE - 9), outline=(40, 40, 40), width=4)
    for i in range(number):
        draw.rectangle((20 + 14 * i, 20, 28 + 14 * i, 40), fill=(40, 40, 40))
    for i, colour in enumerate(colours):
        x = 40 + 64 * i
        draw.ellipse((x, 120, x + 48, 168), fill=colour)
        draw.rectangle((x + 12, 168, x + 36, 220), fill=colour)
    return img


# --- encoding --------------------------------------------------------------------------------


def jpeg_bytes(img: Image.Image) -> bytes:
    buffer = io.BytesIO()
    img.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return buffer.getvalue()


def png_bytes(img: Image.Image, colors: int = PALETTE_COLORS) -> bytes:
    """A palette PNG: median cut without dithering keeps it small and the same on every run."""
    quantized = img.quantize(
        colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    )
    buffer = io.BytesIO()
    quantized.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_json(path: Path, data: Any, *, bom: bool = False) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=4) + "\n"
    write(path, text.encode("utf-8-sig" if bom else "utf-8"))


# --- stories ---------------------------------------------------------------------------------


def bilingual(en: str, ch: str | None) -> dict[str, str]:
    # the official files list "ch" first
    return {"en": en} if ch is None else {"ch": ch, "en": en}


def character(
    tag: str, en: str, ch: str, prompt_en: str, prompt_ch: str, count: int | None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "tag": tag,
        "name_ch": ch,
        "name_en": en,
        "prompt_ch": prompt_ch,
        "prompt_en": prompt_en,
    }
    if count is not None:
        entry["num_of_appearances"] = count
    return entry


@dataclass(frozen=True)
class ShotText:
    index: int
    plot: tuple[str, str | None]
    setting: tuple[str, str | None]
    camera: tuple[str, str | None] | None
    keys: tuple[str, ...]
    names_ch: tuple[str, ...] | None
    script: tuple[str, str | None]

    def to_json(self) -> dict[str, Any]:
        shot: dict[str, Any] = {
            "index": self.index,
            "Plot Correspondence": bilingual(*self.plot),
            "Setting Description": bilingual(*self.setting),
        }
        if self.camera is not None:
            shot["Shot Perspective Design"] = bilingual(*self.camera)
        appearing: dict[str, list[str]] = {"en": list(self.keys)}
        if self.names_ch is not None:
            appearing = {"ch": list(self.names_ch), "en": list(self.keys)}
        shot["Characters Appearing"] = appearing
        shot["Static Shot Description"] = bilingual(*self.script)
        return shot


STORY_01_CHARACTERS = {
    "Eileen": character(
        "realistic_human",
        "Eileen",
        "艾琳",
        "A woman astronaut in her thirties with short light-brown hair and a warm smile,"
        " wearing an orange flight suit with mission patches.",
        "一位三十多岁的女宇航员，浅棕色短发，笑容温暖，身穿带任务徽章的橙色飞行服。",
        4,
    ),
    "Chelsea": character(
        "non_human",
        "Chelsea",
        "切尔西",
        "A tabby cat with grey and brown striped fur, white whiskers and pale green eyes.",
        "一只灰棕色条纹的虎斑猫，白色胡须，浅绿色眼睛。",
        3,
    ),
    "Pip": character(
        "unrealistic_human",
        "Pip",
        "皮普",
        "A cartoon boy with a round head, big black eyes, spiky brown hair,"
        " a red shirt and blue trousers.",
        "一个卡通男孩，圆圆的脑袋，大大的黑眼睛，棕色刺猬头，红色上衣，蓝色裤子。",
        2,
    ),
}

STORY_01_SHOTS = (
    ShotText(
        1,
        ("At dawn the rocket waits on the launch pad.", "黎明时分，火箭静静地立在发射台上。"),
        (
            "A launch site at dawn, a tall white rocket on the pad, a clear pale sky",
            "黎明的发射场，一枚高大的白色火箭立在发射台上，天空晴朗淡蓝",
        ),
        ("Long shot, low angle", "远景，仰视镜头"),
        (),
        (),
        (
            "A tall white rocket stands on the launch pad under a pale morning sky;"
            " nobody is in view.",
            "一枚高大的白色火箭立在发射台上，清晨的天空淡淡的，画面中没有人。",
        ),
    ),
    ShotText(
        2,
        ("Eileen gets ready for her flight.", "艾琳为飞行做准备。"),
        ("A bright preparation room with a flag on the wall", "明亮的准备室，墙上挂着旗帜"),
        ("Medium close-up, eye level", "中近景，平视镜头"),
        ("Eileen",),
        ("艾琳",),
        (
            "Eileen stands in her orange flight suit and smiles at the camera.",
            "艾琳穿着橙色飞行服站着，对着镜头微笑。",
        ),
    ),
    ShotText(
        3,
        ("Chelsea the cat comes to say goodbye.", "小猫切尔西来道别。"),
        (
            "A cafe table by the window, a cup of coffee, morning light",
            "窗边的咖啡桌，一杯咖啡，清晨的阳光",
        ),
        ("Medium shot, eye level", "中景，平视镜头"),
        ("Eileen", "Chelsea"),
        ("艾琳", "切尔西"),
        (
            "Eileen sits at the table while Chelsea rests beside her cup, looking up at her.",
            "艾琳坐在桌边，切尔西趴在她的杯子旁，抬头看着她。",
        ),
    ),
    ShotText(
        4,
        (
            "Her neighbour Pip runs in with a drawing of the rocket.",
            "邻居皮普拿着一幅火箭画跑了进来。",
        ),
        (
            "The same cafe table, a paper drawing of a rocket on it",
            "同一张咖啡桌，桌上放着一幅火箭的画",
        ),
        ("Wide shot, slightly high angle", "全景，略微俯视"),
        ("Eileen", "Chelsea", "Pip"),
        ("艾琳", "切尔西", "皮普"),
        (
            "Pip holds up his drawing, Eileen laughs and Chelsea sniffs the paper.",
            "皮普举起他的画，艾琳笑了，切尔西嗅着那张纸。",
        ),
    ),
    # no Chinese text at all: the loader's "(ch data missing)" placeholder
    ShotText(
        5,
        ("Chelsea waits at the window while the rocket climbs.", None),
        ("A window looking out at the sky, a thin white trail rising in the distance", None),
        ("Close-up, from behind the cat", None),
        ("Chelsea",),
        None,
        ("Chelsea sits on the windowsill, watching a white trail rise into the sky.", None),
    ),
    # no "Shot Perspective Design": the loader drops this shot
    ShotText(
        6,
        ("Pip pins his drawing on the wall.", "皮普把他的画钉在墙上。"),
        ("A kitchen wall with a cork board", "厨房的墙上挂着一块软木板"),
        None,
        ("Pip",),
        ("皮普",),
        (
            "Pip stands on tiptoe and pins the rocket drawing to the cork board.",
            "皮普踮起脚尖，把火箭画钉在软木板上。",
        ),
    ),
    # "Flight Director" is not defined under Characters: skipped with a warning
    ShotText(
        7,
        ("From orbit, Eileen radios home.", "艾琳在轨道上向地面发回无线电。"),
        (
            "The cabin of the shuttle, Earth visible through the window",
            "航天飞机舱内，窗外可以看到地球",
        ),
        ("Medium shot, eye level", "中景，平视镜头"),
        ("Eileen", "Flight Director"),
        ("艾琳", "飞行指挥"),
        (
            "Eileen floats by the window and speaks into her headset;"
            " the flight director's voice answers from the speaker.",
            "艾琳漂浮在窗边，对着耳机说话；飞行指挥的声音从扬声器里传来。",
        ),
    ),
)

STORY_02_CHARACTERS = {
    "Captain Bo": character(
        "unrealistic_human",
        "Captain Bo",
        "波船长",
        "A cartoon sailor with a round face, a black captain's hat,"
        " a yellow raincoat and green boots.",
        "一个卡通水手，圆脸，戴着黑色船长帽，穿黄色雨衣和绿色靴子。",
        2,
    ),
    # no num_of_appearances: the loader's default -1
    "Dapple": character(
        "non_human",
        "Dapple",
        "斑斑",
        "A small dark horse with a long tail and a gentle face.",
        "一匹小黑马，尾巴很长，面容温和。",
        None,
    ),
}

STORY_02_SHOTS = (
    ShotText(
        1,
        ("Captain Bo loses his way in the fog.", "波船长在雾中迷了路。"),
        ("A foggy meadow by the sea in the morning", "清晨海边雾蒙蒙的草地"),
        ("Full shot, eye level", "全身景，平视镜头"),
        ("Captain Bo",),
        ("波船长",),
        ("Captain Bo stands in the fog, holding up a lantern.", "波船长站在雾里，举着一盏灯笼。"),
    ),
    ShotText(
        2,
        ("Dapple the horse finds him and leads him home.", "小马斑斑找到了他，带他回家。"),
        ("A green path along the shore", "海岸边的绿色小路"),
        ("Wide shot, side view", "全景，侧面视角"),
        ("Captain Bo", "Dapple"),
        ("波船长", "斑斑"),
        (
            "Dapple walks ahead on the path and Captain Bo follows, one hand on her mane.",
            "斑斑走在小路前面，波船长跟在后面，一只手搭在她的鬃毛上。",
        ),
    ),
    ShotText(
        3,
        ("At home, a warm cup of coffee waits on the table.", "家里，一杯热咖啡在桌上等着。"),
        ("A kitchen table with a cup of coffee", "厨房餐桌上放着一杯咖啡"),
        ("Close-up, high angle", "特写，俯视镜头"),
        (),
        (),
        (
            "A cup of coffee steams on the wooden table; nobody is in the shot.",
            "一杯咖啡在木桌上冒着热气，画面中没有人。",
        ),
    ),
)

#: every reference image: (story, character key, file name) -> picture and its source line
REFERENCES: dict[tuple[str, str, str], tuple[Picture, str]] = {
    ("01", "Eileen", "00.jpg"): (astronaut_face, "astronaut"),
    ("01", "Eileen", "01.jpg"): (astronaut_portrait, "astronaut"),
    ("01", "Chelsea", "00.jpg"): (chelsea, "chelsea"),
    ("01", "Pip", "00.jpg"): (lambda: cartoon(PIP), "drawn"),
    ("02", "Captain Bo", "00.jpg"): (lambda: cartoon(BO), "drawn"),
    ("02", "Captain Bo", "01.jpg"): (lambda: cartoon(BO_WAVING), "drawn"),
    ("02", "Dapple", "00.jpg"): (dapple, "horse"),
}

#: the backgrounds of the copy-paste shots: (story, index) -> picture and its source line
BACKGROUNDS: dict[tuple[str, int], tuple[Picture, str]] = {
    ("01", 1): (lambda: photo_backdrop("rocket"), "rocket"),
    ("01", 3): (lambda: photo_backdrop("coffee"), "coffee"),
    ("01", 4): (lambda: photo_backdrop("coffee"), "coffee"),
    ("01", 5): (lambda: backdrop((150, 200, 240), (120, 90, 70), "trail"), "drawn"),
    ("01", 7): (lambda: backdrop((20, 20, 50), (90, 90, 100), "earth"), "drawn"),
    ("02", 1): (lambda: backdrop((200, 205, 210), (120, 160, 110), "fog"), "drawn"),
    ("02", 3): (lambda: photo_backdrop("coffee"), "coffee"),
}

#: the copy-paste shots of the layout-A run: shot 2 of story 01 is left out on purpose (a missing
#: shot); story 02's are those of its newer story-level timestamp folder
COPY_PASTE_SHOTS: dict[str, tuple[int, ...]] = {"01": (1, 3, 4, 5, 7), "02": (1, 3)}


def story_json(
    story_type: tuple[str, str], characters: dict[str, Any], shots: Sequence[ShotText]
) -> dict[str, Any]:
    return {
        "Story_type": bilingual(*story_type),
        "Characters": characters,
        "Shots": [shot.to_json() for shot in shots],
    }


def onstage(story: str, index: int) -> tuple[str, ...]:
    shots = STORY_01_SHOTS if story == "01" else STORY_02_SHOTS
    return next(s.keys for s in shots if s.index == index)


def first_reference(story: str, key: str) -> Image.Image | None:
    entry = REFERENCES.get((story, key, "00.jpg"))
    return entry[0]() if entry else None


def copy_paste_shot(story: str, index: int) -> bytes:
    refs = [
        ref for key in onstage(story, index) if (ref := first_reference(story, key)) is not None
    ]
    return png_bytes(copy_paste(BACKGROUNDS[(story, index)][0](), refs))


# --- the fixture -----------------------------------------------------------------------------


def write_dataset(out: Path) -> None:
    root = out / "ViStory"
    write_json(
        root / "01/story.json",
        story_json(("Children's Picture Books", "儿童绘本"), STORY_01_CHARACTERS, STORY_01_SHOTS),
    )
    # with a byte-order mark, as the official loader's utf-8-sig tolerates
    write_json(
        root / "02/story.json",
        story_json(("Fable", "寓言"), STORY_02_CHARACTERS, STORY_02_SHOTS),
        bom=True,
    )
    for (story, key, name), (picture, _) in sorted(REFERENCES.items()):
        write(root / story / "image" / key / name, jpeg_bytes(picture()))


def write_layout_a(out: Path) -> None:
    outputs = out / "outputs"
    for index in COPY_PASTE_SHOTS["01"]:
        write_shot(outputs, METHOD_A, MODE, "en", TS_A, "01", index, copy_paste_shot("01", index))
    chars = outputs / METHOD_A / MODE / "en" / TS_A / "01" / "chars"
    for key in sorted(STORY_01_CHARACTERS):
        ref = first_reference("01", key)
        assert ref is not None
        write(
            chars / f"{key}.png",
            png_bytes(ref.resize((CHAR_SIZE, CHAR_SIZE), Image.Resampling.LANCZOS)),
        )
    # story 02 split into two story-level timestamp runs: the older has shots 1-2, the newer 1 and 3
    story = outputs / METHOD_A / MODE / "en" / TS_A / "02"
    older, newer = STORY_TS
    for index, colour in ((1, (250, 220, 220)), (2, (220, 250, 220))):
        panel = storyboard(index, [colour])
        write(story / older / "shots" / f"shot_{index:02d}.png", png_bytes(panel, 16))
    for index in COPY_PASTE_SHOTS["02"]:
        write(story / newer / "shots" / f"shot_{index:02d}.png", copy_paste_shot("02", index))


STORYBOARD_COLOURS = {
    "Eileen": (230, 120, 40),
    "Chelsea": (130, 120, 110),
    "Pip": (210, 40, 40),
    "Captain Bo": (240, 200, 40),
    "Dapple": (70, 45, 30),
}


def write_layout_b(out: Path) -> None:
    """Language first, images directly in the story folder (no ``shots/``), one of them a JPEG."""
    run = out / "outputs" / METHOD_B / "ch" / MODE / TS_B
    for story, shots in (("01", STORY_01_SHOTS), ("02", STORY_02_SHOTS)):
        for shot in shots:
            if story == "01" and shot.index == 6:
                continue
            defined = STORY_01_CHARACTERS if story == "01" else STORY_02_CHARACTERS
            panel = storyboard(
                shot.index, [STORYBOARD_COLOURS[k] for k in shot.keys if k in defined]
            )
            if story == "01" and shot.index == 2:
                write(run / story / "shot_02.jpg", jpeg_bytes(panel))
            else:
                write(run / story / f"shot_{shot.index:02d}.png", png_bytes(panel, 16))


SOURCES = {
    "astronaut": "`skimage.data.astronaut()`: Eileen Collins, NASA Great Images. Public domain.",
    "chelsea": "`skimage.data.chelsea()`: Chelsea the cat, by Stefan van der Walt. CC0.",
    "coffee": "`skimage.data.coffee()`: coffee cup, by Rachel Michetti (Pikolo Espresso). CC0.",
    "horse": "`skimage.data.horse()`: horse silhouette by Andreas Preuss (openclipart). CC0.",
    "rocket": "`skimage.data.rocket()`: DSCOVR launch on Falcon 9, SpaceX. Public domain.",
    "drawn": "drawn by `tools/make_vistory_fixture.py` with PIL. CC0-1.0.",
}


def files_table() -> list[str]:
    rows = []
    for (story, key, name), (_, source) in sorted(REFERENCES.items()):
        rows.append(f"| `ViStory/{story}/image/{key}/{name}` | {SOURCES[source]} |")
    for story, indices in COPY_PASTE_SHOTS.items():
        for index in indices:
            source = BACKGROUNDS[(story, index)][1]
            pasted = [
                f"`{k}/00.jpg`" for k in onstage(story, index) if (story, k, "00.jpg") in REFERENCES
            ]
            extra = f" Pasted on it: {', '.join(pasted)} (above)." if pasted else ""
            shot = f"`outputs/{METHOD_A}/.../{story}/.../shot_{index:02d}.png`"
            rows.append(f"| {shot} | background: {SOURCES[source]}{extra} |")
    chars = f"`outputs/{METHOD_A}/.../01/chars/*.png`"
    rows.append(f"| {chars} | the first reference of each character, resized |")
    drawn = f"`outputs/{METHOD_A}/.../02/{STORY_TS[0]}/shots/*.png`, `outputs/{METHOD_B}/**`"
    rows.append(f"| {drawn} | {SOURCES['drawn']} |")
    return rows


README = """# ViStoryBench offline fixture

Written by `tools/make_vistory_fixture.py` (deterministic; do not edit by hand).  It stands in
for the ViStory dataset, whose reference images are third-party and are not redistributed here.
The texts were written for this project; see LICENSE.md for every image's source and licence.

## Dataset (`ViStory/`, the official layout)

* `01` (in the official Lite split), "Children's Picture Books": characters `Eileen`
  (realistic_human, two references), `Chelsea` (non_human), `Pip` (unrealistic_human).  Shots
  1-7, 1-based: shot 1 has no character, 2 one, 3 two, 4 three; shot 5 has no `ch` text at all;
  shot 6 has no `Shot Perspective Design` (dropped by the loader); shot 7 lists the undefined
  key `Flight Director` next to `Eileen`.
* `02` (not in Lite), "Fable", `story.json` with a UTF-8 byte-order mark: `Captain Bo`
  (unrealistic_human, two references), `Dapple` (non_human, no `num_of_appearances`).  Shots
  1-3 with one, two and no character.

## Method outputs (`outputs/`)

* Layout A, `copy_paste/base/en/20250101_120000/`: references pasted onto backgrounds.
  * `01/shots/shot_01.png ...`: shots 1, 3, 4, 5, 7 (shot 2 is missing on purpose) and
    `01/chars/<Key>.png`.
  * `02/20250101_115900/shots/` (older: shots 1, 2, drawn panels) and
    `02/20250101_120500/shots/` (newer: shots 1, 3): timestamped story subfolders.
* Layout B, `storyboard/ch/base/20250102_090000/`: drawn storyboard panels lying directly in
  the story folder (no `shots/`), `01/shot_02.jpg` a JPEG, the others PNG.
"""


def license_text() -> str:
    return "\n".join(
        [
            "# Licences of the ViStoryBench fixture",
            "",
            "Story texts (`ViStory/*/story.json`) and drawn pictures: written and drawn for this",
            "project, released under CC0-1.0.  Photographs: taken from the scikit-image package",
            "(`skimage.data`, scikit-image 0.26), whose documentation states these licences.  No",
            "image comes from ViStoryBench.",
            "",
            "| file | source and licence |",
            "|---|---|",
            *files_table(),
            "",
        ]
    )


def build(out: Path) -> None:
    for name in ("ViStory", "outputs"):
        shutil.rmtree(out / name, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    write_dataset(out)
    write_layout_a(out)
    write_layout_b(out)
    (out / "README.md").write_text(README, encoding="utf-8")
    (out / "LICENSE.md").write_text(license_text(), encoding="utf-8")
    # the repository ignores every outputs/ folder (run results); this one is fixture data
    (out / ".gitignore").write_text("!outputs/\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the ViStoryBench offline fixture.")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help="fixture folder (default: the package's)"
    )
    args = parser.parse_args(argv)
    build(args.out)
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"wrote {args.out} ({total / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
