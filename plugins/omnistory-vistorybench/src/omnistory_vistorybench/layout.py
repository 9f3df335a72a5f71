"""The official ViStoryBench method-output layouts: written in layout A, read in A or B.

Layout A (what the official README asks for and what this package writes)::

    <outputs>/<method>/<mode>/<lang>/<YYYYMMDD_HHMMSS>/<story_id>/shots/shot_<NN>.png

Layout B (language first, also accepted by the official reader)::

    <outputs>/<method>/<lang>/<mode>/<timestamp>/<story_id>/...

As in ``vistorybench/dataset_loader/read_outputs.py`` and the ``bench_run.py`` discovery: a method
folder holding an ``en`` or ``ch`` folder is read as B, otherwise as A; inside a story folder,
timestamp-named subfolders (``YYYYMMDD_HHMMSS`` or ``YYYYMMDD-HHMMSS``) hold the images when
present; images lie in a ``shots``/``shot``/``*shot(s)`` subfolder (else the folder itself) and
method-made character images in a ``chars``/``characters``/``*character(s)`` subfolder; a shot's
index is ``int(name.split("_")[-1].split(".")[0])`` and must equal the ``story.json`` index.

Where the official reader would crash or depend on directory listing order, this one is
deterministic and says so: names are visited in natural order, hidden entries are skipped, a
non-numeric story folder or an image name without an index is skipped with a warning, and a
tree that is neither layout raises :class:`LayoutError` naming the folder.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, NamedTuple

from omnistory_core.api import UserError

log = logging.getLogger("omnistory")

IMAGE_EXTENSIONS: tuple[str, ...] = (".png", ".jpg", ".jpeg", ".gif", ".bmp")
LANGUAGES: tuple[str, ...] = ("en", "ch")
#: what the official reader takes for a timestamp folder inside a story folder
TIMESTAMP_PATTERN = re.compile(r"^\d{8}[_-]\d{6}$")
#: what this package writes (the README's form)
TIMESTAMP_FORMAT = "%Y%m%d_%H%M%S"
WRITTEN_TIMESTAMP = re.compile(r"^\d{8}_\d{6}$")
SHOTS_DIR = "shots"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

Layout = Literal["A", "B"]


class LayoutError(UserError):
    """An outputs tree (or a value meant for one) that is not an official layout."""


class RunKey(NamedTuple):
    """One generation run: the levels above the story folders."""

    method: str
    mode: str
    language: str
    timestamp: str


@dataclass(frozen=True)
class StoryOutputs:
    """One story's images: ``shots`` by ``story.json`` index, ``chars`` by file stem."""

    path: Path
    shots: dict[int, Path]
    chars: dict[str, Path]


@dataclass(frozen=True)
class OutputRun:
    """One run's folder and its stories by id (the official ``{story_id: {shots, chars}}``)."""

    key: RunKey
    layout: Layout
    path: Path
    stories: dict[str, StoryOutputs]


def format_timestamp(moment: datetime) -> str:
    """A run timestamp as this package writes it: ``20250101_120000``."""
    return moment.strftime(TIMESTAMP_FORMAT)


def shot_filename(index: int) -> str:
    """``shot_03.png`` for ``story.json`` index 3."""
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise LayoutError(f"a shot index must be a non-negative integer, got {index!r}")
    return f"shot_{index:02d}.png"


def shot_path(
    outputs: str | Path,
    method: str,
    mode: str,
    language: str,
    timestamp: str,
    story_id: str,
    index: int,
) -> Path:
    """Where layout A puts one shot: ``<outputs>/<method>/<mode>/<lang>/<ts>/<story>/shots/``."""
    for name, value in (("method", method), ("mode", mode), ("story id", story_id)):
        _check_segment(name, value)
    if language not in LANGUAGES:
        raise LayoutError(f"language {language!r} is not one of {', '.join(LANGUAGES)}")
    if not WRITTEN_TIMESTAMP.match(timestamp):
        raise LayoutError(f"timestamp {timestamp!r} is not YYYYMMDD_HHMMSS")
    if not story_id.isdigit():
        raise LayoutError(f"story id {story_id!r} is not a ViStory number such as '01'")
    run = Path(outputs) / method / mode / language / timestamp
    return run / story_id / SHOTS_DIR / shot_filename(index)


def write_shot(
    outputs: str | Path,
    method: str,
    mode: str,
    language: str,
    timestamp: str,
    story_id: str,
    index: int,
    image: bytes | str | Path,
) -> Path:
    """Write one shot in layout A, atomically (a reader never sees a partial file).

    ``image`` is PNG bytes or the path of an image file; a file that is not a PNG is converted
    (the name says ``.png``, so its bytes must be one).
    """
    target = shot_path(outputs, method, mode, language, timestamp, story_id, index)
    data = _png_bytes(image)
    target.parent.mkdir(parents=True, exist_ok=True)
    # a dot-name in the same folder: readers skip it and os.replace stays on one filesystem
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def detect_layout(method_dir: str | Path) -> Layout:
    """``"B"`` when an ``en``/``ch`` folder lies directly under the method, ``"A"`` when one lies
    under a mode folder; :class:`LayoutError` naming the folder otherwise."""
    method_dir = Path(method_dir)
    children = _subdirs(method_dir)
    if any(d.name in LANGUAGES for d in children):
        return "B"
    if any(g.name in LANGUAGES for d in children for g in _subdirs(d)):
        return "A"
    raise LayoutError(
        f"{method_dir} is neither official outputs layout: no <method>/<lang>/ (B) nor"
        f" <method>/<mode>/<lang>/ (A) folder with lang in {', '.join(LANGUAGES)}"
    )


def read_outputs(
    outputs: str | Path,
    *,
    methods: Iterable[str] | None = None,
    latest: bool = False,
) -> dict[RunKey, OutputRun]:
    """Every run under an outputs folder, by (method, mode, language, timestamp).

    ``methods`` limits the methods read (default: every folder).  ``latest`` only matters for
    story folders split into timestamp subfolders: the official driver (``bench_run.py``) reads
    them all and merges them, which is the default here, the newest winning a shot index found
    twice; ``latest=True`` reads only the newest, like the official reader's own default.
    """
    outputs = Path(outputs)
    if not outputs.is_dir():
        raise LayoutError(f"outputs folder {outputs} does not exist")
    if methods is None:
        method_dirs = _subdirs(outputs)
        if not method_dirs:
            raise LayoutError(f"{outputs} holds no method folder")
    else:
        method_dirs = [outputs / m for m in methods]
        for d in method_dirs:
            if not d.is_dir():
                raise LayoutError(f"method folder {d} does not exist")
    runs: dict[RunKey, OutputRun] = {}
    for method_dir in method_dirs:
        layout = detect_layout(method_dir)
        for key, run_dir in _run_dirs(method_dir, layout):
            stories = {d.name: read_story_dir(d, latest=latest) for d in _story_dirs(run_dir)}
            runs[key] = OutputRun(key, layout, run_dir, stories)
    return runs


def read_story_dir(story_dir: str | Path, *, latest: bool = False) -> StoryOutputs:
    """One story folder's shots and character images (see :func:`read_outputs` for ``latest``)."""
    story_dir = Path(story_dir)
    stamped = sorted(
        (d for d in _subdirs(story_dir) if TIMESTAMP_PATTERN.match(d.name)),
        key=lambda d: _timestamp_value(d.name),
    )
    if latest:
        stamped = stamped[-1:]
    shots: dict[int, Path] = {}
    chars: dict[str, Path] = {}
    # oldest first, so a newer run's image replaces an older one with the same index
    for folder in stamped or [story_dir]:
        shots.update(_shots_in(_named_subdir(folder, _is_shots_name) or folder))
        chars_dir = _named_subdir(folder, _is_chars_name)
        if chars_dir is not None:
            chars.update({p.stem: p for p in _images_in(chars_dir)})
    return StoryOutputs(story_dir, dict(sorted(shots.items())), chars)


def shot_index_of(filename: str) -> int:
    """The official shot index of an image name: ``shot_07.png`` -> 7, ``3.jpg`` -> 3."""
    return int(filename.split("_")[-1].split(".")[0])


# ---------------------------------------------------------------------------------------------


def _check_segment(name: str, value: str) -> None:
    if not value or value in (".", "..") or "/" in value or "\\" in value or value.startswith("."):
        raise LayoutError(f"{name} {value!r} cannot be a folder name in the outputs layout")


def _png_bytes(image: bytes | str | Path) -> bytes:
    if isinstance(image, bytes):
        if not image.startswith(PNG_SIGNATURE):
            raise LayoutError("shot bytes are not a PNG image")
        return image
    source = Path(image)
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise LayoutError(f"cannot read shot image {source}: {exc}") from exc
    if data.startswith(PNG_SIGNATURE):
        return data
    return _convert_to_png(source)


def _convert_to_png(source: Path) -> bytes:
    import io

    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(source) as img:
            img.load()
            buffer = io.BytesIO()
            img.save(buffer, format="PNG")
    except (OSError, UnidentifiedImageError) as exc:
        raise LayoutError(f"shot image {source} cannot be read as an image: {exc}") from exc
    return buffer.getvalue()


def _natural_key(name: str) -> list[int | str]:
    # the official reader orders with natsort: "shot_2" before "shot_10"
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", name)]


def _subdirs(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return sorted(found, key=lambda p: _natural_key(p.name))


def _run_dirs(method_dir: Path, layout: Layout) -> list[tuple[RunKey, Path]]:
    method = method_dir.name
    found: list[tuple[RunKey, Path]] = []
    if layout == "B":
        for lang_dir in _subdirs(method_dir):
            if lang_dir.name not in LANGUAGES:
                log.warning("ViStory outputs: %s is not a language folder; skipped", lang_dir)
                continue
            for mode_dir in _subdirs(lang_dir):
                for ts_dir in _subdirs(mode_dir):
                    found.append(
                        (RunKey(method, mode_dir.name, lang_dir.name, ts_dir.name), ts_dir)
                    )
    else:
        for mode_dir in _subdirs(method_dir):
            for lang_dir in _subdirs(mode_dir):
                if lang_dir.name not in LANGUAGES:
                    log.warning("ViStory outputs: %s is not a language folder; skipped", lang_dir)
                    continue
                for ts_dir in _subdirs(lang_dir):
                    found.append(
                        (RunKey(method, mode_dir.name, lang_dir.name, ts_dir.name), ts_dir)
                    )
    return found


def _story_dirs(run_dir: Path) -> list[Path]:
    stories: list[Path] = []
    for d in _subdirs(run_dir):
        if d.name.isascii() and d.name.isdigit():
            stories.append(d)
        else:
            log.warning("ViStory outputs: %s is not a story folder (not a number); skipped", d)
    return stories


def _timestamp_value(name: str) -> datetime:
    return datetime.strptime(name.replace("-", "_"), TIMESTAMP_FORMAT)


def _is_shots_name(name: str) -> bool:
    return name.lower() in ("shots", "shot") or name.endswith(("shot", "shots"))


def _is_chars_name(name: str) -> bool:
    return name.lower() in ("chars", "characters") or name.endswith(("character", "characters"))


def _named_subdir(folder: Path, matches: Callable[[str], bool]) -> Path | None:
    candidates = [d for d in _subdirs(folder) if matches(d.name)]
    if not candidates:
        return None
    # prefer the plain name ("shots") over a suffixed one ("gen_shots")
    exact = [d for d in candidates if d.name.lower() in ("shots", "shot", "chars", "characters")]
    chosen = (exact or candidates)[0]
    if len(candidates) > 1:
        log.warning("ViStory outputs: %s has several candidate folders; reading %s", folder, chosen)
    return chosen


def _images_in(folder: Path) -> list[Path]:
    files = [
        p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in IMAGE_EXTENSIONS
    ]
    return sorted(files, key=lambda p: _natural_key(p.name))


def _shots_in(folder: Path) -> dict[int, Path]:
    shots: dict[int, Path] = {}
    for path in _images_in(folder):
        try:
            index = shot_index_of(path.name)
        except ValueError:
            log.warning("ViStory outputs: %s has no shot index in its name; skipped", path)
            continue
        if index in shots:
            log.warning(
                "ViStory outputs: %s and %s are both shot %d; reading the second",
                shots[index],
                path,
                index,
            )
        shots[index] = path
    return shots


__all__ = [
    "IMAGE_EXTENSIONS",
    "TIMESTAMP_FORMAT",
    "TIMESTAMP_PATTERN",
    "Layout",
    "LayoutError",
    "OutputRun",
    "RunKey",
    "StoryOutputs",
    "detect_layout",
    "format_timestamp",
    "read_outputs",
    "read_story_dir",
    "shot_filename",
    "shot_index_of",
    "shot_path",
    "write_shot",
]
