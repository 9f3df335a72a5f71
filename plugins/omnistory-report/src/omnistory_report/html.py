"""The static, self-contained HTML report.

    index.html                  what the run produced (outputs and failures, lengths, calls), the
                                leaderboard, figures, key statistics, systems and examples lists:
                                only sections, figures and tables with data (an unscored run
                                opens with the run and one line on how to score it)
    systems/<slug>.html         one page per system: its scores and outputs per example
    examples/<slug>.html        one page per example: input page, reference, every system's image,
                                narration, speech player, plan, failures and scores
    media/...                   candidate and dataset files, hard-linked (or copied) from the run
    assets/style.css, app.js    filtering and sorting, no network access

Oracle systems carry a red ORACLE badge and border everywhere.  Pages work from ``file://``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from omnistory_core.contract import MODALITIES, StoryExample
from omnistory_report.analysis.cube import JUDGE_TRACKS, ScoreCube
from omnistory_report.analysis.frame import category_codes, column_values
from omnistory_report.analysis.leaderboard import incomplete_columns
from omnistory_report.assets import SCRIPT, STYLE
from omnistory_report.rundir import PARADIGMS, SystemRun
from omnistory_report.tables import INCOMPLETE, MISSING, error_footnote, format_value

_EXT = {"text": ".txt", "image": ".png", "speech": ".wav"}


def slug(text: str) -> str:
    """A file-name-safe, collision-resistant slug."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:60] or "x"
    return f"{base}-{hashlib.sha1(text.encode('utf-8')).hexdigest()[:8]}"


def link_or_copy(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` (copy across file systems), replacing an older file."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


@dataclass
class ReportContext:
    """Everything the pages are rendered from."""

    out_dir: Path
    lb: pd.DataFrame
    info: pd.DataFrame
    cube: ScoreCube
    frame: pd.DataFrame
    figures: Sequence[tuple[str, Path]] = ()
    tables: Sequence[tuple[str, str]] = ()
    inline_tables: Sequence[tuple[str, pd.DataFrame]] = ()
    runs: dict[str, SystemRun] = field(default_factory=dict)
    examples: Sequence[StoryExample] | None = None
    notes: Sequence[str] = ()
    #: what the run produced, shown first: (title, table) pairs (outputs, lengths, calls)
    run_tables: Sequence[tuple[str, pd.DataFrame]] = ()
    #: one line shown where scores are absent (how to produce them)
    scores_note: str = ""
    #: the stand-in leaderboard (:func:`~omnistory_report.analysis.stand_in.stand_in_leaderboard`)
    #: and its columns; empty when no stand-in metric scored the run
    stand_in: pd.DataFrame = field(default_factory=pd.DataFrame)
    stand_in_columns: Sequence[Any] = ()
    #: the stand-in leaderboard's figure (PNG; an SVG beside it), shown under its table
    stand_in_figure: Path | None = None
    #: whether any system has a paper-metric score: without one the paper's leaderboard (only
    #: dashes) gives way to the stand-in leaderboard on the first screen
    paper_scored: bool = True
    summary: np.ndarray = field(init=False)
    oracle_of: dict[str, bool] = field(init=False)
    paradigm_of: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        # plain dicts: these are looked up once per system card (tens of thousands of times)
        self.oracle_of = {str(s): bool(v) for s, v in self.info["oracle"].items()}
        self.paradigm_of = {str(s): str(v) for s, v in self.info["paradigm"].items()}
        self.summary = summary_scores(self.cube)


def _oracle(ctx: ReportContext, system: str) -> bool:
    return ctx.oracle_of.get(system, False)


def _paradigm(ctx: ReportContext, system: str) -> str:
    return ctx.paradigm_of.get(system, "unknown")


def _badges(ctx: ReportContext, system: str) -> str:
    p = _paradigm(ctx, system)
    out = f'<span class="badge p-{escape(p)}">{escape(p)}</span>'
    if _oracle(ctx, system):
        out += '<span class="badge oracle" title="reads the reference">ORACLE</span>'
    return out


def _page(title: str, body: str, depth: int) -> str:
    up = "../" * depth
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title>"
        f'<link rel="stylesheet" href="{up}assets/style.css"></head><body>'
        f'<header class="top"><h1>Omni-StoryBench report</h1>'
        f'<a href="{up}index.html">Leaderboard</a><a href="{up}index.html#figures">Figures</a>'
        f'<a href="{up}index.html#statistics">Statistics</a>'
        f'<a href="{up}index.html#systems">Systems</a>'
        f'<a href="{up}index.html#examples">Examples</a></header>'
        f'<main>{body}</main><script src="{up}assets/app.js"></script></body></html>\n'
    )


def _controls(target: str, paradigms: bool = True, oracle: bool = False, label: str = "") -> str:
    opts = "".join(f'<option value="{p}">{p}</option>' for p in (*PARADIGMS, "unknown"))
    select = (
        f'<select data-target="{target}"><option value="">all paradigms</option>{opts}</select>'
        if paradigms
        else ""
    )
    hide = (
        f'<label><input type="checkbox" class="hide-oracle" data-target="{target}"> '
        "hide oracle systems</label>"
        if oracle
        else ""
    )
    return (
        f'<div class="controls"><input type="search" placeholder="filter {escape(label)}…" '
        f'data-target="{target}">{select}{hide}<span class="count note"></span></div>'
    )


def _frame_table(frame: pd.DataFrame, digits: int = 4) -> str:
    if frame.empty:
        return '<p class="note">(no data)</p>'
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for row in frame.itertuples(index=False, name=None):
        cells = "".join(
            f'<td class="{"l" if isinstance(v, str) else ""}">'
            f"{escape(format_value(v, digits))}</td>"
            for v in row
        )
        rows.append(f"<tr>{cells}</tr>")
    return (
        f'<div class="scroll"><table class="sortable"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )


def _num(value: float | None, digits: int = 3) -> str:
    return MISSING if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


# ---------------------------------------------------------------------------------------------
# Per-example data
# ---------------------------------------------------------------------------------------------


@dataclass
class _ExampleEntry:
    example_id: str
    index: int | None
    example: StoryExample | None


def _example_entries(ctx: ReportContext) -> list[_ExampleEntry]:
    entries: dict[str, _ExampleEntry] = {}
    for ex in sorted(ctx.examples or [], key=lambda e: e.index):
        entries[ex.id] = _ExampleEntry(ex.id, ex.index, ex)
    extra: dict[str, int | None] = {e: None for e in ctx.cube.examples if e not in entries}
    for run in ctx.runs.values():
        for eid in run.records:
            if eid not in entries:
                extra[eid] = extra.get(eid) if extra.get(eid) is not None else run.index_of(eid)
    for eid in sorted(extra, key=lambda e: (extra[e] is None, extra[e] or 0, e)):
        entries[eid] = _ExampleEntry(eid, extra[eid], None)
    return list(entries.values())


class _RowIndex:
    """Scores rows grouped by (example, system), pre-rendered once for all pages.

    Each row becomes one ``criterion: score`` snippet; rows of one evaluator are consecutive, so a
    card's detail table is a join over a slice.
    """

    def __init__(self, frame: pd.DataFrame, cube: ScoreCube):
        self.n_sys = len(cube.systems)
        s = category_codes(frame["system"], cube.systems)
        e = category_codes(frame["example_id"], cube.examples)
        key = e * self.n_sys + s
        labels = {c: column_values(frame[c]) for c in ("kind", "track", "evaluator")}
        joined = pd.Series(labels["kind"]) + "\0" + labels["track"] + "\0" + labels["evaluator"]
        group_code, group_names = pd.factorize(joined, sort=True)
        crit = column_values(frame["criterion"])
        crit_code = pd.factorize(crit, sort=True)[0]
        order = np.lexsort((crit_code, group_code, key))
        self.key = key[order]
        self.group = group_code[order]
        self.group_html = [
            "".join(f'<td class="l">{escape(part)}</td>' for part in g.split("\0"))
            for g in group_names
        ]
        status = column_values(frame["status"])[order]
        score = frame["score"].to_numpy(float)[order]
        crit = crit[order]
        # Escaping happens per distinct value, not per row.
        crit_html = {c: escape(c) for c in set(crit)}
        self.snippet = [
            f'<span class="st-{st}">{crit_html[c]}: {_num(v, 4) if st == "ok" else st}</span>'
            for c, st, v in zip(crit, status, score.tolist(), strict=True)
        ]
        self.e_index = {x: i for i, x in enumerate(cube.examples)}
        self.s_index = {x: i for i, x in enumerate(cube.systems)}

    def rows(self, example_id: str, system: str) -> range:
        e, s = self.e_index.get(example_id), self.s_index.get(system)
        if e is None or s is None:
            return range(0)
        k = e * self.n_sys + s
        return range(
            int(np.searchsorted(self.key, k, "left")), int(np.searchsorted(self.key, k, "right"))
        )


def summary_scores(cube: ScoreCube) -> np.ndarray:
    """(7, S, E): per-example BERT, CLIP, Meta and per-track means over valid judges (NaN: none)."""
    out = np.full((7, len(cube.systems), len(cube.examples)), np.nan)
    for j, name in enumerate(("bertscore", "clip", "speech_meta")):
        k = cube.metric_index(name)
        if k is not None:
            out[j] = np.where(cube.valid[k], cube.values[k], np.nan)
    for j, track in enumerate(JUDGE_TRACKS, start=3):
        ks = cube.judge_indices(track)
        if ks:
            n = cube.valid[ks].sum(axis=0)
            total = (cube.values[ks] * cube.valid[ks]).sum(axis=0)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[j] = np.where(n > 0, total / np.maximum(n, 1), np.nan)
    return out


_SUMMARY_LABELS = (
    ("bertscore", "BERT"),
    ("clip", "CLIP"),
    ("speech_meta", "Meta"),
    ("judge_text", "J_T"),
    ("judge_image", "J_I"),
    ("judge_speech", "J_S"),
    ("judge_omni", "J_O"),
)


def _scores_detail(index: _RowIndex, example_id: str, system: str) -> str:
    rng = index.rows(example_id, system)
    if not len(rng):
        return '<p class="missing">no scores yet</p>'
    rows = []
    start = rng.start
    for i in range(rng.start + 1, rng.stop + 1):
        if i == rng.stop or index.group[i] != index.group[start]:
            cells = "<br>".join(index.snippet[start:i])
            label = index.group_html[index.group[start]]
            rows.append(f'<tr>{label}<td class="l">{cells}</td></tr>')
            start = i
    return (
        '<table><thead><tr><th class="l">kind</th><th class="l">track</th>'
        f'<th class="l">evaluator</th><th class="l">criterion scores</th></tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


# ---------------------------------------------------------------------------------------------
# Media
# ---------------------------------------------------------------------------------------------


def _copy_candidate(ctx: ReportContext, run: SystemRun, modality: str, index: int | None) -> str:
    """Relative URL (from a page one level down) of a copied candidate, or '' if absent."""
    src = run.candidate(modality, index)
    if src is None:
        return ""
    rel = Path("media") / slug(run.system_id) / modality / f"{index}{_EXT[modality]}"
    link_or_copy(src, ctx.out_dir / rel)
    return "../" + rel.as_posix()


def _copy_dataset_image(ctx: ReportContext, path: str, example_id: str, name: str) -> str:
    src = Path(path)
    if not path or not src.is_file():
        return ""
    rel = Path("media") / "examples" / slug(example_id) / f"{name}{src.suffix.lower() or '.png'}"
    link_or_copy(src, ctx.out_dir / rel)
    return "../" + rel.as_posix()


# ---------------------------------------------------------------------------------------------
# Pages
# ---------------------------------------------------------------------------------------------


def _value_html(value: Any) -> str:
    """A metadata value: text as text, a list of records (characters) as a small table, a list of
    words comma-separated, a mapping as a nested list."""
    if value is None:
        return ""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return _kv(value)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, dict) for v in value):
            columns = list(dict.fromkeys(k for v in value for k in v))
            head = "".join(f'<th class="l">{escape(str(c))}</th>' for c in columns)
            rows = "".join(
                "<tr>"
                + "".join(f'<td class="l">{_value_html(v.get(c))}</td>' for c in columns)
                + "</tr>"
                for v in value
            )
            return (
                f'<div class="scroll"><table class="records"><thead><tr>{head}</tr></thead>'
                f"<tbody>{rows}</tbody></table></div>"
            )
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return escape(", ".join(str(v) for v in value))
    return escape(json.dumps(value, ensure_ascii=False))


def _kv(data: dict[str, Any]) -> str:
    if not data:
        return '<p class="note">(none)</p>'
    items = "".join(f"<dt>{escape(str(k))}</dt><dd>{_value_html(v)}</dd>" for k, v in data.items())
    return f'<dl class="kv">{items}</dl>'


def _input_section(ctx: ReportContext, entry: _ExampleEntry) -> str:
    ex = entry.example
    if ex is None:
        return (
            '<p class="note">The dataset example was not loaded for this report; '
            "only the systems' outputs and scores are shown.</p>"
        )
    cur = _copy_dataset_image(ctx, ex.current.image, ex.id, "current")
    ref = _copy_dataset_image(ctx, ex.reference.next_page.image, ex.id, "reference")
    cur_img = (
        f'<img src="{cur}" alt="current page">'
        if cur
        else '<p class="missing">image file not found</p>'
    )
    ref_img = (
        f'<img src="{ref}" alt="reference next page">'
        if ref
        else '<p class="missing">image file not found</p>'
    )
    sp = ex.reference.speech
    return (
        '<div class="example-input">'
        f'<div class="panel"><h3>Current page (input)</h3>{cur_img}'
        f'<p class="narration">{escape(ex.current.text)}</p>'
        f"<h4>Book metadata</h4>{_kv(ex.metadata)}<h4>Next-page conditions</h4>{_kv(ex.conditions)}"
        "</div>"
        f'<div class="panel"><h3>Reference next page</h3>{ref_img}'
        f'<p class="narration">{escape(ex.reference.next_page.text)}</p>'
        "<h4>Target speech</h4>"
        + _kv(
            {
                "speaker": sp.speaker,
                "utterance": sp.utterance,
                "emotion": sp.emotion,
                "speed": sp.speed,
                "pitch": sp.pitch,
                "gender": sp.gender,
            }
        )
        + f'<p class="note">source {escape(ex.source)} · book {escape(ex.book)} · '
        f"{escape(ex.from_key)} → {escape(ex.to_key)}</p></div></div>"
    )


def _failure_html(entry: dict[str, Any] | None) -> str:
    if not isinstance(entry, dict) or entry.get("status") != "failure":
        return ""
    cat = escape(str(entry.get("category") or "unspecified"))
    msg = escape(str(entry.get("message") or ""))
    return f'<p class="failure">failure: {cat}{" — " + msg if msg else ""}</p>'


def _system_card(ctx: ReportContext, index: _RowIndex, entry: _ExampleEntry, system: str) -> str:
    run = ctx.runs.get(system)
    s = ctx.cube.systems.index(system) if system in ctx.cube.systems else None
    e = index.e_index.get(entry.example_id)
    parts = [f"<h3>{escape(system)}{_badges(ctx, system)}</h3>"]
    rec = run.records.get(entry.example_id, {}) if run else {}
    idx = run.index_of(entry.example_id) if run else None
    if idx is None:
        idx = entry.index
    if run is not None:
        img = _copy_candidate(ctx, run, "image", idx)
        parts.append(
            f'<img src="{img}" alt="{escape(system)} image">'
            if img
            else '<p class="missing">no image</p>'
        )
        parts.append(_failure_html(rec.get("image")))
        text = run.text(idx)
        parts.append(
            f'<p class="narration">{escape(text)}</p>'
            if text is not None
            else '<p class="missing">no narration</p>'
        )
        parts.append(_failure_html(rec.get("text")))
        wav = _copy_candidate(ctx, run, "speech", idx)
        parts.append(
            f'<audio controls preload="metadata" src="{wav}"></audio>'
            if wav
            else '<p class="missing">no speech</p>'
        )
        parts.append(_failure_html(rec.get("speech")))
        plan = run.plans.get(entry.example_id)
        if plan is not None:
            parts.append(_plan_html(plan))
    if s is not None and e is not None:
        values = ctx.summary[:, s, e].tolist()
        line = " · ".join(
            f"{label} {_num(v, 3 if j < 3 else 2)}"
            for j, ((_, label), v) in enumerate(zip(_SUMMARY_LABELS, values, strict=True))
        )
        parts.append(
            f'<details><summary class="scoreline">{line}</summary>'
            f"{_scores_detail(index, entry.example_id, system)}</details>"
        )
    else:
        parts.append('<p class="missing">no scores yet</p>')
    oracle = _oracle(ctx, system)
    return (
        f'<div class="card{" oracle" if oracle else ""}" data-item '
        f'data-search="{escape(system.lower())}" data-paradigm="{escape(_paradigm(ctx, system))}" '
        f'data-oracle="{1 if oracle else 0}">{"".join(parts)}</div>'
    )


def _plan_html(plan: dict[str, Any]) -> str:
    body = []
    if plan.get("plan") is not None:
        body.append(f"<pre>{escape(json.dumps(plan['plan'], indent=2, ensure_ascii=False))}</pre>")
    if plan.get("failure"):
        body.append(
            f'<p class="failure">plan failure: '
            f"{escape(json.dumps(plan['failure'], ensure_ascii=False))}</p>"
        )
    repairs = plan.get("repairs")
    if repairs:
        body.append(
            f'<p class="note">repairs: {escape(json.dumps(repairs, ensure_ascii=False))}</p>'
        )
    if plan.get("raw"):
        body.append(
            "<details><summary>raw planner output</summary>"
            f"<pre>{escape(str(plan['raw']))}</pre></details>"
        )
    label = "plan (failed)" if plan.get("failure") else "plan"
    return f"<details><summary>{label}</summary>{''.join(body)}</details>"


def _example_page(
    ctx: ReportContext,
    index: _RowIndex,
    entries: list[_ExampleEntry],
    pos: int,
    slugs: dict[str, str],
    systems: list[str],
) -> str:
    entry = entries[pos]
    prev_link = next_link = "<span></span>"
    if pos > 0:
        eid = entries[pos - 1].example_id
        prev_link = f'<a href="{slugs[eid]}.html">← {escape(eid)}</a>'
    if pos + 1 < len(entries):
        eid = entries[pos + 1].example_id
        next_link = f'<a href="{slugs[eid]}.html">{escape(eid)} →</a>'

    cards = "".join(_system_card(ctx, index, entry, s) for s in systems)
    title = f"Example {entry.example_id}" + (
        f" (#{entry.index})" if entry.index is not None else ""
    )
    body = (
        f'<nav class="pager">{prev_link}<a href="../index.html#examples">all examples</a>'
        f"{next_link}</nav>"
        f"<h2>{escape(title)}</h2>{_input_section(ctx, entry)}"
        f"<h2>Systems</h2>{_controls('#cards', oracle=True, label='systems')}"
        f'<div class="cards" id="cards">{cards}</div>'
    )
    return _page(title, body, depth=1)


def _system_page(
    ctx: ReportContext, system: str, entries: list[_ExampleEntry], ex_slugs: dict[str, str]
) -> str:
    run = ctx.runs.get(system)
    cube = ctx.cube
    s = cube.systems.index(system) if system in cube.systems else None
    lb_row = ctx.lb[ctx.lb["system"] == system]
    head = f"<h2>{escape(system)}{_badges(ctx, system)}</h2>"
    if _oracle(ctx, system):
        head += (
            '<p class="failure">Oracle system: it reads the reference and is not comparable.</p>'
        )
    if run is not None:
        manifest = {
            k: v for k, v in run.manifest.items() if k in ("paradigm", "components", "oracle")
        }
        head += _kv(manifest)
    if not lb_row.empty:
        scores = _frame_table(lb_row.drop(columns=["system"]))
        head += f"<h3>Scores</h3>{scores}"
    e_index = {x: i for i, x in enumerate(cube.examples)}
    rows = []
    for entry in entries:
        e = e_index.get(entry.example_id)
        rec = run.records.get(entry.example_id, {}) if run else {}
        status = []
        for m, modality in enumerate(MODALITIES):
            r = rec.get(modality) if isinstance(rec, dict) else None
            if isinstance(r, dict) and r.get("status") == "failure":
                status.append(
                    f'<span class="failure">{escape(str(r.get("category") or "failure"))}</span>'
                )
            elif s is not None and e is not None and cube.missing[m, s, e]:
                status.append('<span class="missing">missing</span>')
            elif isinstance(r, dict) and r.get("status") == "ok":
                status.append("ok")
            else:
                status.append(MISSING)
        values = ctx.summary[:, s, e].tolist() if s is not None and e is not None else [None] * 7
        # a system without scores gets no columns of dashes
        vals = (
            "".join(f'<td data-v="{v}">{_num(v, 3)}</td>' for v in values) if s is not None else ""
        )
        rows.append(
            f'<tr data-item data-search="{escape(entry.example_id.lower())}">'
            f"<td>{'' if entry.index is None else entry.index}</td>"
            f'<td class="l"><a href="../examples/{ex_slugs[entry.example_id]}.html">'
            f"{escape(entry.example_id)}</a></td>"
            + "".join(f'<td class="l">{x}</td>' for x in status)
            + vals
            + "</tr>"
        )
    header = "".join(
        f"<th>{h}</th>"
        for h in (
            "#",
            "example",
            "text",
            "image",
            "speech",
            *(lab for _, lab in (_SUMMARY_LABELS if s is not None else ())),
        )
    )
    body = (
        head
        + "<h3>Examples</h3>"
        + _controls("#sysrows", paradigms=False, label="examples")
        + f'<table class="sortable" id="sysrows"><thead><tr>{header}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return _page(f"System {system}", body, depth=1)


def _leaderboard_html(ctx: ReportContext, sys_slugs: dict[str, str]) -> str:
    cols = [
        ("n_examples", "N", 0),
        ("bertscore", "BERT", 4),
        ("clip", "CLIP", 4),
        ("speech_meta", "Meta", 4),
        ("judge_text", "J_T", 3),
        ("judge_image", "J_I", 3),
        ("judge_speech", "J_S", 3),
        ("judge_omni", "J_O", 3),
        ("total", "Total", 4),
        ("total_zero", "Total (zero-filled)", 4),
        ("text_score", "T", 3),
        ("image_score", "I", 3),
        ("speech_score", "A", 3),
        ("traditional_total", "Trad.", 3),
        ("missing_text", "miss T", 0),
        ("missing_image", "miss I", 0),
        ("missing_speech", "miss S", 0),
    ]
    head = '<th>#</th><th class="l">system</th><th class="l">paradigm</th>' + "".join(
        f"<th>{escape(label)}</th>" for _, label, _ in cols
    )
    rows = []
    for rank, row in enumerate(ctx.lb.itertuples(index=False), 1):
        system = row.system
        oracle = _oracle(ctx, system)
        name = f'<a href="systems/{sys_slugs[system]}.html">{escape(system)}</a>'
        if oracle:
            name += '<span class="badge oracle" title="reads the reference">ORACLE</span>'
        marks = incomplete_columns(row)
        cells = "".join(
            f'<td data-v="{getattr(row, c)}">'
            f"{escape(format_value(getattr(row, c), d, trim_integers=d == 0))}"
            + (
                f' <span class="incomplete" title="computed without examples whose evaluator '
                f'could not answer">{INCOMPLETE}</span>'
                if c in marks
                else ""
            )
            + "</td>"
            for c, _, d in cols
        )
        rows.append(
            f'<tr data-item class="{"oracle" if oracle else ""}" '
            f'data-search="{escape(system.lower())}" '
            f'data-paradigm="{escape(_paradigm(ctx, system))}" data-oracle="{1 if oracle else 0}">'
            f'<td>{rank}</td><td class="l">{name}</td>'
            f'<td class="l">{escape(_paradigm(ctx, system))}</td>{cells}</tr>'
        )
    footnote = error_footnote(ctx.lb)
    note = f'<p class="note incomplete-note">{escape(footnote)}</p>' if footnote else ""
    return (
        _controls("#leaderboard", oracle=True, label="systems")
        + f'<div class="scroll"><table class="sortable" id="leaderboard"><thead><tr>{head}</tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table></div>{note}"
    )


def _stand_in_html(ctx: ReportContext, sys_slugs: dict[str, str], first: bool = False) -> str:
    """The stand-in leaderboard: its own section and title, never mixed into the paper table;
    each column names its backend, valid-only and zero-filled side by side.  ``first``: it opens
    the page (no paper metric scored the run), titled as the leaderboard, its figure below."""
    from omnistory_report.analysis.stand_in import NOT_SCORED, TITLE

    table = ctx.stand_in
    if table.empty:
        return ""
    head = '<th>#</th><th class="l">system</th><th>N</th>'
    for col in ctx.stand_in_columns:
        title = f"{col.evaluator}/{col.criterion}"
        head += f'<th>{escape(title)}<br><span class="note">{escape(col.backend)}</span></th>'
    rows = []
    for rank, row in enumerate(table.to_dict("records"), 1):
        system = str(row["system"])
        oracle = _oracle(ctx, system)
        name = (
            f'<a href="systems/{sys_slugs[system]}.html">{escape(system)}</a>'
            if system in sys_slugs
            else escape(system)
        )
        if oracle:
            name += '<span class="badge oracle" title="reads the reference">ORACLE</span>'
        # one cell per column: valid-only (sorted on), zero-filled after it
        cells = "".join(
            f'<td data-v="{row[c.label]}">{escape(format_value(row[c.label], 4))} '
            f'<span class="note">({escape(format_value(row[c.label + " (0)"], 4))})</span></td>'
            if c.scored
            else f'<td class="note">{escape(NOT_SCORED)}</td>'
            for c in ctx.stand_in_columns
        )
        rows.append(
            f'<tr class="{"oracle" if oracle else ""}"><td>{rank}</td>'
            f'<td class="l">{name}</td><td>{row["n_examples"]}</td>{cells}</tr>'
        )
    title = f"Leaderboard: {TITLE[0].lower()}{TITLE[1:]}" if first else TITLE
    figure = ""
    if ctx.stand_in_figure is not None:
        png = ctx.stand_in_figure.relative_to(ctx.out_dir).as_posix()
        figure = (
            f'<figure class="stand-in-figure"><a href="{escape(png[:-4])}.svg">'
            f'<img src="{escape(png)}" alt="{escape(TITLE)}"></a>'
            "<figcaption>Stand-in metrics per system, valid-only (click for SVG)</figcaption>"
            "</figure>"
        )
    note = (
        f'<p class="scores-absent">{_inline_code(ctx.scores_note)}</p>'
        if first and ctx.scores_note
        else ""
    )
    return (
        f'<h2 id="stand-in">{escape(title)}</h2>'
        "<p>Metrics computed with real pretrained weights that are installable offline, standing "
        "in for the paper's metrics; each column names its backend. Their numbers are on other "
        "scales than the paper's and never enter the paper's tables or Total Average. "
        "Each cell: the valid-only mean, then (in brackets) the zero-filled one.</p>"
        '<p><a href="stand_in_leaderboard.csv">stand_in_leaderboard.csv</a></p>'
        '<div class="scroll"><table class="sortable" id="standin"><thead>'
        f"<tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
        f"{figure}{note}"
    )


def _inline_code(text: str) -> str:
    """Escaped text with `backticked` spans as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escape(text))


def _run_section(ctx: ReportContext, entries: list[_ExampleEntry], ex_slugs: dict[str, str]) -> str:
    """What the run produced: outputs and failures, lengths, calls; the scores line if absent
    (under the stand-in leaderboard instead where that opens the page)."""
    if not ctx.runs:
        return ""
    scores_note = ctx.scores_note if ctx.stand_in.empty else ""
    first = (
        f' <a href="examples/{ex_slugs[entries[0].example_id]}.html">Open the per-example '
        "viewer</a> (every system's image, narration, speech and plan side by side)."
        if entries
        else ""
    )
    lead = (
        f"<p>{len(ctx.runs)} system(s) over {len(entries)} example(s).{first}</p>"
        + (f'<p class="scores-absent">{_inline_code(scores_note)}</p>' if scores_note else "")
        + "".join(f'<p class="note">{escape(n)}</p>' for n in ctx.notes if ctx.lb.empty)
    )
    tables = "".join(
        f"<div><h3>{escape(t)}</h3>{_frame_table(f, digits=1)}</div>"
        for t, f in ctx.run_tables
        if not f.empty
    )
    return f'<h2 id="run">This run</h2>{lead}<div class="run-tables">{tables}</div>'


def _index_page(
    ctx: ReportContext,
    entries: list[_ExampleEntry],
    sys_slugs: dict[str, str],
    ex_slugs: dict[str, str],
    systems: list[str],
) -> str:
    cube = ctx.cube
    intro = (
        f"<p>{len(cube.systems)} systems and {len(cube.examples)} examples in the scores table. "
        "Valid-only scores average each metric and each judge over its own valid examples "
        "(Appendix E.5); zero-filled scores divide the same sums by the system's number of "
        "examples (Appendix F.4). Metrics are on 0–1, judges on 1–10; Total Average = "
        "(10·BERT + 10·CLIP + 10·Meta + J_T + J_I + J_S + J_O) / 7. Click a header to sort. "
        '<span class="badge oracle">ORACLE</span> systems read the reference and are not '
        "comparable.</p>"
    )
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in ctx.notes)
    figs = "".join(
        f'<figure><a href="{escape(p.with_suffix(".svg").relative_to(ctx.out_dir).as_posix())}">'
        f'<img src="{escape(p.relative_to(ctx.out_dir).as_posix())}" alt="{escape(t)}"></a>'
        f"<figcaption>{escape(t)} (click for SVG)</figcaption></figure>"
        for t, p in ctx.figures
    )
    inline = "".join(f"<h3>{escape(t)}</h3>{_frame_table(f)}" for t, f in ctx.inline_tables)
    links = "".join(
        f'<li>{escape(t)}: <a href="tables/{escape(stem)}.md">Markdown</a> · '
        f'<a href="tables/{escape(stem)}.csv">CSV</a></li>'
        for t, stem in ctx.tables
    )
    sys_items = "".join(
        f'<li data-item data-search="{escape(s.lower())}" '
        f'data-paradigm="{escape(_paradigm(ctx, s))}" '
        f'data-oracle="{1 if _oracle(ctx, s) else 0}"><a href="systems/{sys_slugs[s]}.html">'
        f"{escape(s)}</a>{_badges(ctx, s)}</li>"
        for s in systems
    )
    ex_rows = []
    for entry in entries:
        ex = entry.example
        book = escape(ex.book) if ex else ""
        src = escape(ex.source) if ex else ""
        text = escape(ex.current.text[:120]) if ex else ""
        search = (entry.example_id + " " + (ex.book if ex else "")).lower()
        ex_rows.append(
            f'<tr data-item data-search="{escape(search)}">'
            f"<td>{'' if entry.index is None else entry.index}</td>"
            f'<td class="l"><a href="examples/{ex_slugs[entry.example_id]}.html">'
            f'{escape(entry.example_id)}</a></td><td class="l">{src}</td><td class="l">{book}</td>'
            f'<td class="l">{text}</td></tr>'
        )
    run = _run_section(ctx, entries, ex_slugs)
    scored = not ctx.lb.empty and ctx.paper_scored
    stand_in_first = not scored and not ctx.stand_in.empty
    leaderboard = (
        f'<h2 id="leaderboard-h">Leaderboard</h2>{intro}{notes}'
        '<p><a href="leaderboard.csv">leaderboard.csv</a> · '
        '<a href="leaderboard.md">leaderboard.md</a></p>'
        f"{_leaderboard_html(ctx, sys_slugs)}"
        if scored
        else (notes if not run else "")
    )
    if stand_in_first:
        leaderboard = _stand_in_html(ctx, sys_slugs, first=True) + notes
    else:
        leaderboard += _stand_in_html(ctx, sys_slugs)
    figures = f'<h2 id="figures">Figures</h2><div class="figures">{figs}</div>' if figs else ""
    statistics = (
        f'<h2 id="statistics">Statistics</h2>{inline}'
        + (f"<h3>All tables</h3><ul>{links}</ul>" if links else "")
        if inline or links
        else ""
    )
    opens_with_scores = scored or stand_in_first
    body = (
        (run if not opens_with_scores else "")
        + leaderboard
        + figures
        + statistics
        + (run if opens_with_scores else "")
        + f'<h2 id="systems">Systems</h2>{_controls("#systemlist", oracle=True, label="systems")}'
        f'<ul id="systemlist">{sys_items}</ul>'
        '<h2 id="examples">Examples</h2>'
        f"{_controls('#examplelist', paradigms=False, label='examples')}"
        f'<table class="sortable" id="examplelist"><thead><tr><th>#</th><th class="l">example</th>'
        f'<th class="l">source</th><th class="l">book</th><th class="l">current narration</th>'
        f"</tr></thead><tbody>{''.join(ex_rows)}</tbody></table>"
    )
    return _page("Omni-StoryBench report", body, depth=0)


def write_html_report(ctx: ReportContext) -> Path:
    """Write the whole HTML report under ``ctx.out_dir``; returns the index page."""
    out = ctx.out_dir
    (out / "assets").mkdir(parents=True, exist_ok=True)
    (out / "assets" / "style.css").write_text(STYLE, encoding="utf-8")
    (out / "assets" / "app.js").write_text(SCRIPT, encoding="utf-8")
    systems = list(ctx.lb["system"]) + sorted(s for s in ctx.runs if s not in set(ctx.lb["system"]))
    entries = _example_entries(ctx)
    sys_slugs = {s: slug(s) for s in systems}
    ex_slugs = {e.example_id: slug(e.example_id) for e in entries}
    index = _RowIndex(ctx.frame, ctx.cube)

    (out / "examples").mkdir(exist_ok=True)
    for pos, entry in enumerate(entries):
        page = _example_page(ctx, index, entries, pos, ex_slugs, systems)
        (out / "examples" / f"{ex_slugs[entry.example_id]}.html").write_text(page, encoding="utf-8")
    (out / "systems").mkdir(exist_ok=True)
    for s in systems:
        page = _system_page(ctx, s, entries, ex_slugs)
        (out / "systems" / f"{sys_slugs[s]}.html").write_text(page, encoding="utf-8")
    index_path = out / "index.html"
    index_path.write_text(_index_page(ctx, entries, sys_slugs, ex_slugs, systems), encoding="utf-8")
    return index_path
