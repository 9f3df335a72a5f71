"""The ViStoryBench report's HTML page: the leaderboards per policy and split, their notes, the
failures by category and the story strips (every system's shots of a story side by side, the
images copied under ``assets/``).  Below :mod:`omnistory_vistorybench.report`, which builds the
:class:`Page`; reads through :mod:`omnistory_vistorybench.report_inputs`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import pandas as pd

from omnistory_core.api import DatasetError
from omnistory_vistorybench import aggregation as agg
from omnistory_vistorybench import dataset as vistory
from omnistory_vistorybench import leaderboard as lb
from omnistory_vistorybench import records
from omnistory_vistorybench.report_inputs import JobRun

log = logging.getLogger("omnistory")

ASSETS = "assets"
PUBLISHED = "published"
OURS = "ours"


# ----------------------------------------------------------------------------------------------
# the page


@dataclass
class Page:
    """What the HTML page shows."""

    out_dir: Path
    boards: Mapping[str, pd.DataFrame]
    failures: pd.DataFrame
    runs: Mapping[str, JobRun]
    scores_path: Path | None
    scored: bool
    published: bool
    left_out: list[str]
    thumbnail: int
    run_dir: Path | None
    notes: list[str] = field(default_factory=list)
    #: where a split of a run took the whole run's run-level value (:func:`split_run_rows`)
    split_notes: list[str] = field(default_factory=list)


STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; color: #1d1d1f; margin: 0; }
header { background: #20232a; color: #fff; padding: 10px 20px; }
header h1 { font-size: 18px; margin: 0; }
header a { color: #9ecbff; margin-right: 14px; }
main { padding: 16px 20px 40px; }
h2 { margin-top: 28px; border-bottom: 1px solid #d9d9de; padding-bottom: 4px; }
table { border-collapse: collapse; font-size: 13px; margin: 6px 0 14px; }
th, td { border: 1px solid #d9d9de; padding: 3px 7px; text-align: right; }
th { background: #f5f5f7; } td.l, th.l { text-align: left; }
tr.published td { background: #f3f6fb; color: #3a4a63; }
.badge { border-radius: 4px; padding: 0 5px; font-size: 11px; font-weight: 600;
         background: #d6e6f5; margin-left: 4px; }
.note { color: #6b6b70; } .scroll { overflow-x: auto; }
.story { border: 1px solid #d9d9de; border-radius: 6px; padding: 10px; margin: 14px 0; }
.refs, .strip { display: flex; gap: 8px; overflow-x: auto; align-items: flex-start; }
.refs { padding-bottom: 8px; border-bottom: 1px dashed #d9d9de; margin-bottom: 8px; }
figure { margin: 0; flex: 0 0 auto; text-align: center; font-size: 12px; color: #6b6b70; }
figure img { display: block; max-height: 180px; max-width: 240px; background: #f5f5f7; }
.refs figure img { max-height: 120px; max-width: 160px; }
.system { margin: 6px 0 10px; } .system h4 { margin: 2px 0; font-size: 13px; }
.shot.missing { width: 160px; height: 120px; border: 2px dashed #b3261e; color: #b3261e;
                display: flex; align-items: center; justify-content: center; padding: 4px; }
"""


def render(page: Page) -> str:
    """The whole ``index.html``: leaderboards, failure counts, then the story strips."""
    strips = _strips_html(page)  # first: it copies the images and collects notes
    body = [
        "<header><h1>ViStoryBench report</h1>",
        '<a href="#leaderboard">leaderboard</a><a href="#failures">failures</a>',
        '<a href="#stories">stories</a></header><main>',
        _leaderboard_section(page),
        _failures_section(page),
        strips,
        "</main>",
    ]
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>ViStoryBench report</title>"
        f"<style>{STYLE}</style></head><body>{''.join(body)}</body></html>\n"
    )


_POLICY_TITLES = {
    "official": "Official policy (the official summary's means)",
    "valid_only": "Valid-only (means over scored shots and stories)",
    "zero_filled": "Zero-filled (every unscored shot or story counts 0)",
}


def _leaderboard_section(page: Page) -> str:
    parts = ['<section id="leaderboard"><h2>Leaderboard</h2>']
    if not page.scored:
        parts.append(f'<p class="note no-scores">{escape(_no_scores_note(page))}</p>')
    if page.left_out:
        parts.append(
            '<p class="note">Published methods not ranked (outside the official roster;'
            " --roster all ranks them): "
            f"{escape(', '.join(page.left_out))}</p>"
        )
    if page.published and page.scored:
        parts.append(
            '<p class="note">Rows marked published are the official numbers of the bench_results'
            " CSV; they are the same under every policy, ranked together with ours.</p>"
        )
    if page.scored and any(len(agg.run_splits(run.info())) > 1 for run in page.runs.values()):
        parts.append(
            '<p class="note">A full run is also ranked on its lite stories; its run-level values'
            " there (the Inception Score) are computed over its lite images, as the official"
            " recomputes them per split.</p>"
        )
    parts.extend(f'<p class="note split-fallback">{escape(note)}</p>' for note in page.split_notes)
    parts.extend(_board_notes(page))
    for policy, board in page.boards.items():
        parts.append(f"<h3>{escape(_POLICY_TITLES[policy])}</h3>")
        if board.empty:
            parts.append('<p class="note">No ranked runs.</p>')
            continue
        for split, part in board.groupby("split", sort=False):
            parts.append(
                f'<h4>split {escape(str(split))}</h4><div class="scroll">'
                f"{_board_table(part, policy, str(split))}</div>"
            )
    parts.append("</section>")
    return "".join(parts)


def _board_notes(page: Page) -> list[str]:
    """What the page says about the boards: categories nobody scored, the metric settings."""
    out = []
    board = page.boards.get("official")
    if board is not None and not board.empty:
        for split, categories in agg.not_scored(board).items():
            names = ", ".join(lb.CATEGORY_HEADERS[c].removesuffix("_rank") for c in categories)
            out.append(
                f'<p class="note not-scored">split {escape(split)}: {escape(names)} not scored'
                " by any system: every row ties there (the official ranks it so), so its rank"
                " is not shown; the overall rank still counts it as the official does.</p>"
            )
        if "metric_settings" in board.columns and page.scored:
            out.append(
                '<p class="note">metric_settings: "official settings" when all five evaluators'
                " scored the row's runs with the official settings (checkpoints by name, judge"
                ' gpt-4.1, parameters at the official values); "not comparable" says what'
                " differs (stand-ins, another judge or checkpoint, an evaluator not run)."
                " Checkpoints are recognised by name; their fingerprints are in"
                " evaluators.json. The ports' documented departures (README, Fidelity) apply"
                " to every row of ours.</p>"
            )
    return out


def _no_scores_note(page: Page) -> str:
    run = page.run_dir if page.run_dir is not None else Path("RUN_DIR")
    where = page.scores_path if page.scores_path is not None else run / "scores.jsonl"
    return (
        f"No scores yet ({where} does not exist or has no scored rows): the leaderboard of our"
        " systems appears once the run is scored. Score it with `python -m omnistory_core"
        f" evaluate {run}`, then rebuild this page with `python -m omnistory_core report --task"
        f" vistorybench --scores {where} --run-dir {run} --out {page.out_dir}`."
    )


_TEXT_COLUMNS = ("Method", "model", "mode", "model_key", "source", "metric_settings")


def _board_table(board: pd.DataFrame, policy: str, split: str) -> str:
    columns = [str(c) for c in board.columns if c != "split"]
    head = "".join(
        f'<th class="l">{escape(c)}</th>'
        if c in _TEXT_COLUMNS
        else f'<th title="{escape(c)}">{escape(agg.PAPER_NAMES.get(c) or c)}</th>'
        for c in columns
    )
    ranks = set(lb.CATEGORY_HEADERS.values())
    rows = []
    for record in board[columns].to_dict("records"):
        source = record.get("source", "")
        cls = ' class="published"' if source == PUBLISHED else ""
        cells = []
        for c in columns:
            value = record[c]
            text = escape(_fmt(value))
            if c in ranks and text == "—":
                text = '<span class="not-scored">not scored</span>'
            if c == "model" and source == PUBLISHED:
                text += f'<span class="badge">{PUBLISHED}</span>'
            align = ' class="l"' if c in _TEXT_COLUMNS else ""
            cells.append(f"<td{align}>{text}</td>")
        rows.append(f"<tr{cls}>{''.join(cells)}</tr>")
    return (
        f'<table class="leaderboard" data-policy="{escape(policy)}" data-split="{escape(split)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _left(text: bool) -> str:
    return ' class="l"' if text else ""


def _fmt(value: Any) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1000 else f"{value:.1f}"
    return str(value)


def _failures_section(page: Page) -> str:
    parts = ['<section id="failures"><h2>Failures per metric</h2>']
    if page.failures.empty:
        parts.append('<p class="note">No scores rows.</p></section>')
        return "".join(parts)
    text = ("system", "evaluator", "metric", "scope")
    head = "".join(f"<th{_left(c in text)}>{escape(c)}</th>" for c in page.failures.columns)
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td{_left(c in text)}>{escape(_fmt(v))}</td>"
            for c, v in zip(page.failures.columns, r, strict=True)
        )
        + "</tr>"
        for r in page.failures.itertuples(index=False)
    )
    parts.append(f'<table class="failures"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody>')
    parts.append("</table></section>")
    return "".join(parts)


# -- story strips -------------------------------------------------------------------------------


@dataclass
class _Story:
    story_id: str
    story_type: str
    shots: list[int]
    characters: list[tuple[str, str, list[Path]]]  # key, name, reference images


def _stories(page: Page) -> list[_Story]:
    """The stories of the run, in dataset order: from each job's dataset (the first job that
    loads wins for a story; jobs on the same dataset load it once), else from its records (no
    reference images then)."""
    stories: dict[str, _Story] = {}
    from_dataset: set[str] = set()
    loaded: dict[str, list[records.Story]] = {}
    for run in page.runs.values():
        key = json.dumps(
            [run.dataset.get("root"), run.dataset.get("name"), run.split, run.language,
             run.story_ids],
            default=str,
        )  # fmt: skip
        if key not in loaded:
            loaded[key] = _load_stories(run, page.notes)
        for story in loaded[key]:
            if story.id not in stories:
                from_dataset.add(story.id)
                stories[story.id] = _Story(
                    story.id,
                    story.story_type,
                    [s.index for s in story.shots],
                    [(k, c.name, list(c.images)) for k, c in story.characters.items()],
                )
        for row in run.records:
            sid = str(row["story_id"])
            entry = stories.setdefault(sid, _Story(sid, "", [], []))
            index = int(row["shot_index"])
            if sid not in from_dataset and index not in entry.shots:
                entry.shots.append(index)
    for entry in stories.values():
        entry.shots.sort()
    return sorted(stories.values(), key=lambda s: (len(s.story_id), s.story_id))


def _load_stories(run: JobRun, notes: list[str]) -> list[records.Story]:
    spec = run.dataset
    root = spec.get("root")
    path = Path(str(root)) if root else None
    if (path is None or not path.is_dir()) and spec.get("name") == "vistory_fixture":
        path = vistory.fixture_root()
    if path is None or not path.is_dir():
        notes.append(f"{run.system}: dataset root {root!r} not found: no reference images")
        return []
    try:
        return vistory.load_stories(
            path,
            split=run.split if run.split in vistory.SPLITS else "full",
            language=run.language if run.language in records.LANGUAGES else "en",
            stories=run.story_ids,
        )
    except (DatasetError, OSError) as exc:
        notes.append(f"{run.system}: the dataset did not load ({exc}): no reference images")
        return []


def _strips_html(page: Page) -> str:
    parts = ['<section id="stories"><h2>Stories</h2>']
    if not page.runs:
        why = (
            f"no ViStoryBench job directory in {page.run_dir}"
            if page.run_dir is not None
            else "no job directory given (--run-dir)"
        )
        parts.append(f'<p class="note">No story strips: {escape(why)}.</p>')
    stories = _stories(page)
    for story in stories:
        parts.append(_story_html(page, story))
    parts.extend(f'<p class="note">{escape(n)}</p>' for n in page.notes)
    parts.append("</section>")
    return "".join(parts)


def _story_html(page: Page, story: _Story) -> str:
    sid = escape(story.story_id)
    refs = []
    for key, name, images in story.characters:
        for i, image in enumerate(images):
            src = _asset(page, image, Path("refs", story.story_id, _slug(key), f"{i:02d}"))
            label = escape(name if len(images) == 1 else f"{name} ({i + 1})")
            img = f'<img src="{src}" alt="{label}">' if src else "unreadable"
            refs.append(
                f'<figure class="ref" data-character="{escape(key)}">{img}'
                f"<figcaption>{label}</figcaption></figure>"
            )
    if not refs:
        refs.append('<p class="note">no character reference images</p>')
    systems = [
        _system_strip(page, run, story) for run in page.runs.values() if _has_story(run, story)
    ]
    title = f"Story {sid}" + (f" · {escape(story.story_type)}" if story.story_type else "")
    return (
        f'<div class="story" id="story-{sid}" data-story="{sid}"><h3>{title}</h3>'
        f'<div class="refs" data-story="{sid}">{"".join(refs)}</div>{"".join(systems)}</div>'
    )


def _has_story(run: JobRun, story: _Story) -> bool:
    if run.story_ids is not None:
        return story.story_id in run.story_ids
    return any(str(r["story_id"]) == story.story_id for r in run.records)


def _system_strip(page: Page, run: JobRun, story: _Story) -> str:
    by_shot = {int(r["shot_index"]): r for r in run.records if str(r["story_id"]) == story.story_id}
    cells = []
    for index in story.shots:
        row = by_shot.get(index)
        label = f"shot {index:02d}"
        src = None
        reason = "no record"
        if row is not None and row.get("status") == "ok" and row.get("path"):
            image = run.path / str(row["path"])
            dest = Path("shots", _slug(run.system), story.story_id, f"shot_{index:02d}")
            src = _asset(page, image, dest) if image.is_file() else None
            reason = "image unreadable" if image.is_file() else "image file missing"
        elif row is not None:
            reason = str(row.get("category") or row.get("status") or "missing")
        if src:
            cells.append(
                f'<figure class="shot" data-shot="{index}"><img src="{src}" alt="{escape(label)}">'
                f"<figcaption>{escape(label)}</figcaption></figure>"
            )
        else:
            cells.append(
                f'<figure class="shot-missing" data-shot="{index}"><div class="shot missing">'
                f"missing: {escape(reason)}</div><figcaption>{escape(label)}</figcaption></figure>"
            )
    where = f"{run.mode} / {run.language} / {run.timestamp}"
    return (
        f'<div class="system"><h4>{escape(run.system)} <span class="note">{escape(where)}'
        f'</span></h4><div class="strip" data-system="{escape(run.system)}" '
        f'data-story="{escape(story.story_id)}">{"".join(cells)}</div></div>'
    )


def _slug(name: str) -> str:
    """A file-name-safe form of ``name``, unique per name (a short hash of it appended when the
    name had to change)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "x"
    if safe == name:
        return safe
    return f"{safe}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def _asset(page: Page, source: Path, stem: Path) -> str | None:
    """Copy ``source`` into the report's assets (a thumbnail of ``page.thumbnail`` pixels, or the
    file itself with ``thumbnail=0``) and return its relative URL; None when it cannot be read."""
    from PIL import Image, UnidentifiedImageError

    rel = Path(ASSETS, stem)
    if page.thumbnail == 0:
        rel = rel.with_suffix(source.suffix.lower())
        dest = page.out_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest)
        return rel.as_posix()
    rel = rel.with_suffix(".jpg")
    dest = page.out_dir / rel
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        with Image.open(source) as image:
            image.thumbnail((page.thumbnail, page.thumbnail))
            image.convert("RGB").save(dest, "JPEG", quality=85)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        log.warning("report: cannot read image %s (%s)", source, exc)
        return None
    return rel.as_posix()


__all__ = ["ASSETS", "OURS", "PUBLISHED", "Page", "render"]
