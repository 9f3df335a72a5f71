"""``human export``: sample the human-study items of a run and write a Label Studio project.

Sampling follows Appendix F.5: one fixed, common window of ``window`` consecutive story
transitions (by dataset index, among the transitions every system has a record for), the same
window for every system and every track (text, image, speech, integrated), so the plan has
``systems x window`` items per track.  The window's start is drawn with ``seed`` (or given with
``start``); the queue order of the tasks is shuffled with the same seed.  A run with fewer common
transitions than the paper's window of 10 (a pilot, the demo) is rated on all of them, with one
warning; a window asked for explicitly (``--window 4``) that does not fit is refused.  Each task
asks for ``redundancy`` ratings (Label Studio's *maximum annotations per task*; the paper's target
is 2) and annotators may skip.  Everything is deterministic given the run directory and the options.

Written to ``OUT``::

    OUT/tasks.json              Label Studio import file: [{"data": {"item_id", "html"}}, ...]
    OUT/labeling_config.xml     the four rubric ratings (1–10) of :mod:`.labelstudio`
    OUT/project.json            title, label_config, maximum_annotations, ... (Label Studio API)
    OUT/plan.json               the sampled items: item_id -> system, example, track (not shown to
                                annotators: the tasks carry only an opaque item id and the HTML)
    OUT/media/...               copies of the candidate images and audio (in opaque per-system
                                folders) and of the dataset's current and reference images,
                                referenced from the HTML as ``MEDIA_URL + relative path``

The default ``media_url`` is ``/data/local-files/?d=<OUT's folder name>/media/``: Label Studio
serves those when started with ``LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED=true`` and
``LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT`` set to OUT's parent folder (see the README).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path
from typing import Any

from omnistory_eval.judges.rubric import CRITERIA

from omnistory_report.human.labelstudio import DATA_HTML, DATA_ITEM_ID, labeling_config
from omnistory_report.rundir import CANDIDATE_FILES, SystemRun, read_run_dir

PLAN_FORMAT = "omnistory-human-plan/1"
HUMAN_TRACKS: tuple[str, ...] = ("text", "image", "speech", "omni")
TRACK_TITLES = {
    "text": "Text (next-page narration)",
    "image": "Image (next-page illustration)",
    "speech": "Speech (character utterance)",
    "omni": "Integrated (narration, illustration and speech together)",
}
#: the outputs shown for each track
TRACK_OUTPUTS = {
    "text": ("text",),
    "image": ("image",),
    "speech": ("speech",),
    "omni": ("text", "image", "speech"),
}
DEFAULT_WINDOW = 10
DEFAULT_REDUNDANCY = 2
DEFAULT_SEED = 20260925


class HumanExportError(ValueError):
    """The run directory or the options cannot give a plan (nothing is written)."""


@dataclass(frozen=True)
class PlannedItem:
    """One item: a system's output for one transition in one track."""

    item_id: str
    system: str
    example_id: str
    track: str


@dataclass(frozen=True)
class HumanPlan:
    """The sampled study: window, systems, tracks and items (``plan.json``)."""

    window: tuple[str, ...]
    systems: tuple[str, ...]
    tracks: tuple[str, ...]
    items: tuple[PlannedItem, ...]
    redundancy: int
    seed: int
    run_dir: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "run_dir": self.run_dir,
            "seed": self.seed,
            "redundancy": self.redundancy,
            "window": list(self.window),
            "systems": list(self.systems),
            "tracks": list(self.tracks),
            "items": [asdict(i) for i in self.items],
        }

    @classmethod
    def from_dict(cls, data: Any, source: str) -> HumanPlan:
        if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
            raise ValueError(
                f"{source}: not a human-study plan (field 'format' != {PLAN_FORMAT!r})"
            )
        items = []
        for n, raw in enumerate(data.get("items") or []):
            try:
                item = PlannedItem(**{k: str(raw[k]) for k in PlannedItem.__dataclass_fields__})
            except (KeyError, TypeError) as exc:
                raise ValueError(f"{source}: items[{n}] lacks field {exc}") from exc
            if item.track not in HUMAN_TRACKS:
                raise ValueError(f"{source}: items[{n}]: unknown track {item.track!r}")
            items.append(item)
        return cls(
            window=tuple(map(str, data.get("window") or ())),
            systems=tuple(map(str, data.get("systems") or ())),
            tracks=tuple(map(str, data.get("tracks") or ())),
            items=tuple(items),
            redundancy=int(data.get("redundancy", DEFAULT_REDUNDANCY)),
            seed=int(data.get("seed", DEFAULT_SEED)),
            run_dir=str(data.get("run_dir", "")),
        )


def read_plan(path: str | Path) -> HumanPlan:
    """Read ``plan.json`` (errors name the file and field)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: plan not found (it is written by `human export`)") from None
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc
    return HumanPlan.from_dict(data, str(path))


def item_id(system: str, example_id: str, track: str) -> str:
    """An opaque, deterministic item id (annotators must not see the system's name)."""
    digest = hashlib.sha256(f"{system}\0{example_id}\0{track}".encode()).hexdigest()
    return f"item-{digest[:16]}"


def _common_examples(runs: dict[str, SystemRun]) -> list[str]:
    """Transitions every system has a record (or plan) for, in dataset-index order."""
    common: set[str] | None = None
    index: dict[str, int] = {}
    for run in runs.values():
        ids = set(run.records) | set(run.plans)
        common = ids if common is None else common & ids
        for eid in ids:
            i = run.index_of(eid)
            if i is not None:
                index.setdefault(eid, i)
    return sorted(common or (), key=lambda e: (index.get(e, 1 << 62), e))


def window_size(window: int, common: int, run_dir: str = "") -> tuple[int, str | None]:
    """The window to sample among ``common`` transitions, and a warning when the paper's window
    (the default) does not fit and all common transitions are taken instead."""
    # window == DEFAULT_WINDOW, typed or not: the command line hands its default on as a number
    if window == DEFAULT_WINDOW and 0 < common < window:
        where = f"{run_dir}: " if run_dir else ""
        return common, (
            f"omnistory: warning: {where}only {common} transition(s) are common to every system;"
            f" the study uses all {common} instead of a window of {window}"
        )
    return window, None


def sample_plan(
    runs: dict[str, SystemRun],
    *,
    window: int = DEFAULT_WINDOW,
    seed: int = DEFAULT_SEED,
    start: int | None = None,
    examples: Sequence[str] | None = None,
    redundancy: int = DEFAULT_REDUNDANCY,
    include_oracles: bool = False,
    run_dir: str = "",
    warn: Callable[[str], None] | None = None,
) -> HumanPlan:
    """The study plan: a common window of transitions x every system x the four tracks.
    ``warn`` receives the one-line warning of a default window shrunk to a smaller run."""
    systems = sorted(s for s, r in runs.items() if include_oracles or not r.oracle)
    if not systems:
        raise HumanExportError(f"{run_dir}: no system to evaluate (oracle systems are left out)")
    if redundancy < 1:
        raise HumanExportError("--redundancy must be at least 1")
    common = _common_examples({s: runs[s] for s in systems})
    if examples:
        unknown = [e for e in examples if e not in common]
        if unknown:
            raise HumanExportError(
                f"{run_dir}: example(s) {unknown} are not in every system's records"
            )
        chosen = list(dict.fromkeys(examples))
    else:
        if window < 1:
            raise HumanExportError("--window must be at least 1")
        if not common:
            raise HumanExportError(f"{run_dir}: no transition is common to every system")
        window, warning = window_size(window, len(common), run_dir)
        if warning and warn is not None:
            warn(warning)
        if len(common) < window:
            raise HumanExportError(
                f"{run_dir}: a window of {window} transitions needs {window} transitions common "
                f"to every system; there are {len(common)} (use --window {len(common)})"
            )
        last = len(common) - window
        if start is None:
            start = random.Random(seed).randint(0, last)
        elif not 0 <= start <= last:
            raise HumanExportError(f"--start must be between 0 and {last}, got {start}")
        chosen = common[start : start + window]
    items = [
        PlannedItem(item_id(s, e, t), s, e, t)
        for t in HUMAN_TRACKS
        for s in systems
        for e in chosen
    ]
    random.Random(seed).shuffle(items)  # the queue order: systems and tracks interleaved
    return HumanPlan(
        window=tuple(chosen),
        systems=tuple(systems),
        tracks=HUMAN_TRACKS,
        items=tuple(items),
        redundancy=redundancy,
        seed=seed,
        run_dir=run_dir,
    )


class _Media:
    """Copies media files under OUT/media and returns their URLs."""

    def __init__(self, out: Path, url: str) -> None:
        self.root, self.url = out / "media", url

    def add(self, source: Path, rel: str) -> str:
        dest = self.root / rel
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)
        return self.url + rel


def _kv(mapping: dict[str, Any]) -> str:
    rows = "".join(
        f"<li><b>{escape(str(k))}</b>: {escape(v if isinstance(v, str) else json.dumps(v))}</li>"
        for k, v in mapping.items()
    )
    return f"<ul>{rows}</ul>" if rows else "<p>(none)</p>"


def _image(media: _Media, path: str | Path | None, rel: str, alt: str) -> str:
    if path is None or not Path(path).is_file():
        return f"<p><i>{escape(alt)}: not available</i></p>"
    url = media.add(Path(path), rel + Path(path).suffix)
    return f'<img src="{escape(url)}" alt="{escape(alt)}" style="max-width:480px"/>'


def item_html(item: PlannedItem, run: SystemRun, example: Any | None, media: _Media) -> str:
    """The HTML one task shows: the rubric of the track, the context, the output(s), the truth."""
    parts = [f"<h3>{escape(TRACK_TITLES[item.track])}</h3>"]
    crit = "".join(f"<li>{escape(c.replace('_', ' '))}</li>" for c in CRITERIA[item.track])
    parts.append(f"<p>Criteria for this track:</p><ol>{crit}</ol>")
    n = hashlib.sha256(item.example_id.encode()).hexdigest()[:12]
    if example is not None:
        parts.append("<h4>Story metadata</h4>" + _kv(dict(example.metadata)))
        parts.append("<h4>Current page</h4>")
        parts.append(_image(media, example.current.image, f"dataset/{n}/current", "current page"))
        parts.append(f"<p>{escape(example.current.text)}</p>")
        parts.append("<h4>Generation conditions</h4>" + _kv(dict(example.conditions)))
    else:
        parts.append("<p><i>The dataset was not available at export: no context shown.</i></p>")
    parts.append("<h4>Generated next page</h4>")
    index = run.index_of(item.example_id)
    # opaque media folders: annotators must not read the system's name from a URL
    folder = "s-" + hashlib.sha256(item.system.encode()).hexdigest()[:12]
    for modality in TRACK_OUTPUTS[item.track]:
        path = run.candidate(modality, index)
        if path is None:
            parts.append(f"<p><i>No {modality} output was generated for this item.</i></p>")
        elif modality == "text":
            parts.append(f"<p><b>Narration:</b> {escape(path.read_text(encoding='utf-8'))}</p>")
        elif modality == "image":
            parts.append(_image(media, path, f"{folder}/image/{index}/generated", "generated"))
        else:
            url = media.add(path, f"{folder}/speech/{index}/{CANDIDATE_FILES['speech']}")
            parts.append(f'<audio controls src="{escape(url)}"></audio>')
    if example is not None:
        ref = example.reference
        parts.append("<h4>Ground truth</h4>")
        if item.track in ("text", "omni"):
            parts.append(f"<p>{escape(ref.next_page.text.strip())}</p>")
        if item.track in ("image", "omni"):
            parts.append(_image(media, ref.next_page.image, f"dataset/{n}/reference", "reference"))
        if item.track in ("speech", "omni"):
            parts.append(_kv(asdict(ref.speech)))
    return "\n".join(parts)


def write_export(
    plan: HumanPlan,
    runs: dict[str, SystemRun],
    examples: Sequence[Any] | None,
    out: Path,
    media_url: str | None = None,
) -> Path:
    """Write tasks, config, project settings, plan and media into ``out``; returns tasks.json."""
    if (out / "plan.json").exists():
        raise HumanExportError(f"{out}: already holds an export (plan.json); choose another --out")
    url = (
        media_url if media_url is not None else f"/data/local-files/?d={out.resolve().name}/media/"
    )
    by_id = {e.id: e for e in examples or ()}
    out.mkdir(parents=True, exist_ok=True)
    media = _Media(out, url)
    tasks = [
        {
            "data": {
                DATA_ITEM_ID: item.item_id,
                DATA_HTML: item_html(item, runs[item.system], by_id.get(item.example_id), media),
            }
        }
        for item in plan.items
    ]
    config = labeling_config()
    (out / "labeling_config.xml").write_text(config, encoding="utf-8")
    project = {
        "title": "Omni-StoryBench human evaluation",
        "description": "Rate each item on the four rubric criteria (1-10); skip if unsure.",
        "label_config": config,
        "maximum_annotations": plan.redundancy,
        "show_skip_button": True,
        "sampling": "Sequential sampling",
    }
    (out / "project.json").write_text(json.dumps(project, indent=2) + "\n", encoding="utf-8")
    tasks_path = out / "tasks.json"
    tasks_path.write_text(json.dumps(tasks, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "plan.json").write_text(json.dumps(plan.to_dict(), indent=1) + "\n", encoding="utf-8")
    return tasks_path


def export_run(
    run_dir: Path,
    out: Path,
    *,
    window: int = DEFAULT_WINDOW,
    seed: int = DEFAULT_SEED,
    start: int | None = None,
    examples: Sequence[str] | None = None,
    redundancy: int = DEFAULT_REDUNDANCY,
    include_oracles: bool = False,
    media_url: str | None = None,
) -> HumanPlan:
    """Read the run directory, sample the plan and write the Label Studio project."""
    runs = read_run_dir(run_dir)
    if not runs:
        raise HumanExportError(f"{run_dir}: no system folder (manifest.json) found")
    plan = sample_plan(
        runs,
        window=window,
        seed=seed,
        start=start,
        examples=examples,
        redundancy=redundancy,
        include_oracles=include_oracles,
        run_dir=str(run_dir),
        warn=lambda line: print(line, file=sys.stderr),
    )
    dataset = None
    try:
        from omnistory_report.context import load_examples

        dataset = load_examples({s: runs[s] for s in plan.systems})
        problem = "" if dataset else "no manifest names a dataset"
    except Exception as exc:  # noqa: BLE001 - the outputs can still be rated without context
        problem = str(exc)
    if problem:
        print(
            f"omnistory: warning: dataset examples could not be loaded ({problem}); the tasks "
            "show the outputs without the story context",
            file=sys.stderr,
        )
    write_export(plan, runs, dataset, out, media_url)
    return plan
