"""``report --cross RUN_DIR [RUN_DIR ...] --out DIR``: one image-making plugin across benchmarks.

The promise of one framework for two benchmarks is that the same model plugin runs on both.  This
view takes scored runs of Omni-StoryBench and ViStoryBench (two run or sweep directories, or one
sweep over both tasks) and shows, for each image-making plugin that ran on both (an image expert,
or a backbone that makes images, keyed ``image/<name>`` / ``backbone/<name>``):

* its Omni-StoryBench image-track scores: the valid-only mean of each image-track criterion of
  its systems (``scores.jsonl`` rows of track ``image``, status ``ok``);
* its ViStoryBench metrics and ranks: its row of the task's own leaderboard (built here from
  that run's ``scores.jsonl``, as ``report --task vistorybench`` builds it), every metric and the
  five category ranks and the overall rank;
* the published rows of both benchmarks where they exist (``data/published/``: the
  Omni-StoryBench leaderboard's CLIP and image judge J_I averaged over the published systems with
  that image model; the ViStoryBench lite table's rows of that method), marked ``published``.

Writes ``cross.csv`` (one row per plugin and source), ``cross.md`` and ``cross.png`` (Omni-
StoryBench image score against ViStoryBench prompt alignment, ours and published).  A plugin that
ran on one benchmark only is listed in ``cross.md`` as such, not in the table.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

import pandas as pd

OSB = "omnistorybench"
VSB = "vistorybench"
#: our plugin -> its name in the published Omni-StoryBench leaderboard (image / backbone column)
OSB_PUBLISHED: dict[str, str] = {
    "image/dev": "FLUX.1-dev",
    "image/kontext": "FLUX.1-Kontext",
    "image/nitro": "Nitro-T-1.2B",
    "backbone/mmada": "MMaDA",
    "backbone/emu3": "Emu3-9B",
    "backbone/hyperclova": "HyperCLOVA X 8B Omni",
    "backbone/anygpt": "AnyGPT",
    "backbone/omnidiffusion": "Omni-Diffusion",
    "backbone/dynin": "Dynin-Omni",
}
#: our plugin -> the published ViStoryBench methods it reproduces (system presets of its plugin)
VSB_PUBLISHED: dict[str, tuple[str, ...]] = {
    "image/nanobanana": ("NanoBanana", "Gemini"),
    "image/seedream": ("Seedream4",),
    "image/gpt_image": ("GPT4o",),
}
#: the ViStoryBench leaderboard columns shown (our key, the published table's column)
VSB_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cids_cross_mean", "Cross Cref Score (Ref-Gen)"),
    ("cids_self_mean", "Self Cref Score (Gen-Gen)"),
    ("cross_csd", "Cross CSD Score (Ref-Gen)"),
    ("self_csd", "Self CSD Score (Gen-Gen)"),
    ("aesthetic_score", "Aesthetics Score"),
    ("inception_score", "Inception Score"),
    ("occm", "OCCM"),
    ("scene", "Scene"),
    ("camera", "Camera"),
    ("character_action", "Global Character Action"),
    ("single_character_action", "Local/Single Character Action"),
    ("prompt_align_avg", "Prompt Align Avg"),
)
VSB_RANKS: tuple[str, ...] = (
    "Character Consistency(CRef)_rank",
    "Style Consistency(SRef)_rank",
    "Prompt Alignment_rank",
    "Generative Quality_rank",
    "Diversity_rank",
    "overall_rank",
)


class CrossError(ValueError):
    """Runs that cannot be compared (named, one line)."""


# -- our runs ---------------------------------------------------------------------------------
def job_dirs(run_dir: Path) -> list[Path]:
    """The job directories of a run or sweep directory (itself, or its children)."""
    if (run_dir / "manifest.json").is_file():
        return [run_dir]
    return sorted(p.parent for p in run_dir.glob("*/manifest.json"))


def image_plugin(manifest: Mapping[str, Any]) -> str | None:
    """``image/<name>`` or ``backbone/<name>`` of the component that made the job's images."""
    components = manifest.get("components") or {}
    image = components.get("image")
    if isinstance(image, Mapping) and image.get("name"):
        return f"image/{image['name']}"
    backbone = components.get("backbone")
    paradigm = str(manifest.get("paradigm") or "")
    if isinstance(backbone, Mapping) and ("any-to-any" in paradigm or "T+I" in paradigm):
        return f"backbone/{backbone['name']}"
    return None


def read_jobs(run_dirs: Iterable[Path]) -> pd.DataFrame:
    """One row per job: run directory, task, system, image-making plugin."""
    rows = []
    for run_dir in run_dirs:
        for job in job_dirs(run_dir):
            path = job / "manifest.json"
            try:
                manifest = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise CrossError(f"{path}: unreadable manifest ({exc})") from None
            task = manifest.get("task")
            rows.append(
                {
                    "run_dir": str(run_dir),
                    "task": str(task.get("name")) if isinstance(task, Mapping) else OSB,
                    "system": str(manifest.get("system_id") or job.name),
                    "plugin": image_plugin(manifest),
                }
            )
    return pd.DataFrame(rows, columns=["run_dir", "task", "system", "plugin"])


def read_scores(run_dir: Path) -> pd.DataFrame:
    path = run_dir / "scores.jsonl"
    if not path.is_file():
        raise CrossError(
            f"{path} not found: score the run first (python -m omnistory_core evaluate {run_dir})"
        )
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise CrossError(f"{path}:{n}: not JSON ({exc})") from None
    return pd.DataFrame(rows)


def osb_image_scores(run_dir: Path, systems: Sequence[str]) -> dict[str, float]:
    """Valid-only means of the image-track criteria over ``systems``, keyed
    ``osb_<evaluator>.<criterion>``."""
    scores = read_scores(run_dir)
    if scores.empty or "track" not in scores:
        return {}
    chosen = scores[
        (scores["track"] == "image") & (scores["status"] == "ok") & scores["system"].isin(systems)
    ]
    chosen = chosen[chosen["score"].notna()]
    means = chosen.groupby(["evaluator", "criterion"])["score"].mean()
    return {f"osb_{e}.{c}": float(v) for (e, c), v in means.items()}


def vsb_leaderboard(run_dir: Path, work: Path) -> pd.DataFrame:
    """The ViStoryBench task's leaderboard of the run, built from its scores."""
    from omnistory_core.plugins import load_plugins

    task = load_plugins().task(VSB)
    out = Path(
        task.report(work, scores=run_dir / "scores.jsonl", run_dir=run_dir, options={"html": False})
    )
    return pd.read_csv(out / "leaderboard.csv", encoding="utf-8-sig")


# -- published rows ---------------------------------------------------------------------------
def published(name: str) -> pd.DataFrame:
    text = files("omnistory_report.data.published").joinpath(name).read_text(encoding="utf-8")
    import io

    return pd.read_csv(io.StringIO(text))


def osb_published(plugin: str) -> dict[str, Any] | None:
    name = OSB_PUBLISHED.get(plugin)
    if name is None:
        return None
    table = published("omnistorybench_leaderboard.csv")
    column = "image" if plugin.startswith("image/") else "backbone"
    rows = table[table[column] == name]
    if rows.empty:
        return None
    return {
        "osb_published_name": name,
        "osb_published_rows": len(rows),
        "osb_clip.cosine": float(rows["CLIP"].mean()),
        "osb_judge.J_I": float(rows["J_I"].mean()),
    }


def vsb_published(plugin: str) -> list[dict[str, Any]]:
    table = published("vistorybench_detail_lite.csv")
    out = []
    for method in VSB_PUBLISHED.get(plugin, ()):
        for _, row in table[table["model"] == method].iterrows():
            entry: dict[str, Any] = {
                "vsb_published": f"{method}/{row['mode']}",
                "vsb_split": "lite",
            }
            entry.update({f"vsb_{key}": float(row[col]) for key, col in VSB_COLUMNS})
            out.append(entry)
    return out


# -- the view ---------------------------------------------------------------------------------
def cross_table(run_dirs: Sequence[Path], work: Path) -> tuple[pd.DataFrame, list[str]]:
    """The side-by-side table and the notes (plugins on one benchmark only)."""
    jobs = read_jobs(run_dirs)
    jobs = jobs[jobs["plugin"].notna()]
    tasks = set(jobs["task"])
    if not {OSB, VSB} <= tasks:
        raise CrossError(
            f"--cross needs scored runs of both {OSB} and {VSB}; these hold"
            f" {sorted(tasks) or 'none'}"
        )
    plugins = sorted(
        set(jobs.loc[jobs["task"] == OSB, "plugin"]) & set(jobs.loc[jobs["task"] == VSB, "plugin"])
    )
    notes = [
        f"{plugin} ran on {task} only"
        for plugin, task in sorted(
            {(p, t) for p, t in zip(jobs["plugin"], jobs["task"], strict=True)}
        )
        if plugin not in plugins
    ]
    boards: dict[str, pd.DataFrame] = {}
    for n, run_dir in enumerate(sorted(set(jobs.loc[jobs["task"] == VSB, "run_dir"]))):
        boards[run_dir] = vsb_leaderboard(Path(run_dir), work / f"vistorybench_{n}")
    rows: list[dict[str, Any]] = []
    for plugin in plugins:
        ours = jobs[jobs["plugin"] == plugin]
        row: dict[str, Any] = {"plugin": plugin, "source": "ours"}
        osb = ours[ours["task"] == OSB]
        row["osb_systems"] = ", ".join(sorted(osb["system"]))
        for run_dir, group in osb.groupby("run_dir"):
            row.update(osb_image_scores(Path(run_dir), list(group["system"])))
        vsb = ours[ours["task"] == VSB]
        row["vsb_systems"] = ", ".join(sorted(vsb["system"]))
        for run_dir, group in vsb.groupby("run_dir"):
            board = boards[str(run_dir)]
            mine = board[board["model"].astype(str).isin(list(group["system"]))]
            if "split" in mine:
                mine = mine.sort_values("split")  # full before lite: the whole run first
            if not mine.empty:
                first = mine.iloc[0]
                row["vsb_split"] = first.get("split")
                row.update({f"vsb_{k}": first.get(k) for k, _ in VSB_COLUMNS if k in first})
                row.update({f"vsb_{r}": first.get(r) for r in VSB_RANKS if r in first})
        rows.append(row)
        extra = osb_published(plugin)
        if extra:
            rows.append({"plugin": plugin, "source": "published", **extra})
        rows += [{"plugin": plugin, "source": "published", **e} for e in vsb_published(plugin)]
    return pd.DataFrame(rows), notes


def cross_figure(table: pd.DataFrame, path: Path) -> Path:
    """Omni-StoryBench image score (CLIP cosine) against ViStoryBench prompt alignment."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_col, y_col = "osb_clip.cosine", "vsb_prompt_align_avg"
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    for source, marker in (("ours", "o"), ("published", "^")):
        part = table[table["source"] == source] if not table.empty else table
        for _, row in part.iterrows():
            x, y = row.get(x_col), row.get(y_col)
            if pd.notna(x) and pd.notna(y):
                ax.scatter([x], [y], marker=marker, label=f"{row['plugin']} ({source})")
    ax.set_xlabel("Omni-StoryBench image track: CLIP cosine (mean)")
    ax.set_ylabel("ViStoryBench prompt alignment (avg)")
    ax.set_title("One plugin, two benchmarks")
    if ax.collections:
        ax.legend(fontsize="small")
    else:
        ax.text(0.5, 0.5, "no plugin has both scores", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def markdown(table: pd.DataFrame, notes: Sequence[str]) -> str:
    lines = ["# One image-making plugin on both benchmarks", ""]
    if table.empty:
        lines.append("No image-making plugin ran on both benchmarks.")
    else:
        shown = table.copy()
        header = list(shown.columns)
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for _, row in shown.iterrows():
            cells = []
            for col in header:
                value = row[col]
                if isinstance(value, float):
                    cells.append("—" if pd.isna(value) else f"{value:.4g}")
                else:
                    cells.append(
                        "—"
                        if value is None or (not isinstance(value, str) and pd.isna(value))
                        else str(value)
                    )
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *[f"- {note}" for note in notes], "", "![cross](cross.png)", ""]
    return "\n".join(lines)


def build_cross(run_dirs: Sequence[Path], out_dir: Path) -> Path:
    """Write ``cross.csv``, ``cross.md`` and ``cross.png`` into ``out_dir``; returns it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="omnistory-cross-") as tmp:
        table, notes = cross_table([Path(d) for d in run_dirs], Path(tmp))
    table.to_csv(out_dir / "cross.csv", index=False)
    cross_figure(table, out_dir / "cross.png")
    (out_dir / "cross.md").write_text(markdown(table, notes), encoding="utf-8")
    return out_dir


__all__ = ["CrossError", "build_cross", "cross_table", "image_plugin"]
