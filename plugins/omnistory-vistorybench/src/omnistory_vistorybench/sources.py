"""Where the ViStoryBench runs to evaluate come from: job directories (their manifests and
``outputs/`` trees), external outputs trees in the official layout, and the datasets they were
made from, loaded once per spec and held to the fingerprint the job recorded.

Below :mod:`omnistory_vistorybench.evaluation` (which turns the runs into units) and
:mod:`omnistory_vistorybench.planned` (the runs a dry-run sweep only planned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.api import ConfigError, UserError
from omnistory_vistorybench import declared, layout, records


class EvaluationError(UserError):
    """ViStoryBench runs that cannot be evaluated (one line naming the folder or file)."""


# -- runs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    """One run found: its system id, folder, outputs, dataset options (the run's language
    added when loaded), the fingerprint its job recorded (None: not checked), where it was
    found (for messages) and the store its job used."""

    system: str
    path: Path
    run: layout.OutputRun
    spec: dict[str, Any]
    fingerprint: str | None = None
    where: str = ""
    store: str | None = None
    #: a job a dry-run sweep planned (:func:`omnistory_vistorybench.planned.planned_source`): shot
    #: path -> its image as the run will write it (stored, or a stand-in for one still to make)
    planned: dict[str, Any] | None = None
    #: ``job`` (a job directory) or ``outputs`` (an external outputs tree)
    kind: str = "job"


def _job_run(job: Path, options: Mapping[str, Any], latest: bool) -> _Source:
    """One job directory's run, from its manifest and its ``outputs/`` tree."""
    import json

    manifest_path = job / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvaluationError(f"{manifest_path}: cannot read the manifest: {exc}") from None
    task = (manifest.get("task") or {}).get("name")
    if task != declared.NAME:
        raise EvaluationError(f"{manifest_path}: field 'task' is {task!r}, not 'vistorybench'")
    info = manifest.get("layout") or {}
    try:
        key = layout.RunKey(
            str(info["method"]), str(info["mode"]), str(info["language"]), str(info["timestamp"])
        )
    except KeyError as exc:
        raise EvaluationError(f"{manifest_path}: field 'layout' lacks {exc}") from None
    outputs = job / str(info.get("outputs") or "outputs")
    runs = layout.read_outputs(outputs, latest=latest) if outputs.is_dir() else {}
    # a job whose every shot failed wrote no folder: its run is empty, not absent
    run = runs.get(key) or layout.OutputRun(key, "A", outputs, {})
    dataset = dict(manifest.get("dataset") or {})
    spec = {k: dataset.get(k) for k in ("name", "root", "split", "stories") if k in dataset}
    if spec.get("name") == vistory_fixture_name() and not Path(str(spec.get("root"))).is_dir():
        # the bundled fixture moves with the package (a reinstall): read the installed copy,
        # which the fingerprint check below holds to the one the job ran on
        spec["root"] = None
    spec.update(options)
    return _Source(
        system=run_label(key),
        path=job,
        run=run,
        spec=spec,
        # another copy named on the command line is the user's choice: not checked
        fingerprint=None if options.get("root") else dataset.get("fingerprint"),
        where=str(manifest_path),
        store=manifest.get("store"),
    )


def _tree_runs(outputs: Path, options: Mapping[str, Any], latest: bool) -> list[_Source]:
    """Every run of an external outputs tree, named (see the module docstring)."""
    if not options.get("root") and options.get("name") != vistory_fixture_name():
        raise ConfigError(
            f"--outputs {outputs}: say which dataset its runs answer: dataset.root=DIR (the"
            " folder holding ViStory/<NN>/story.json) or dataset=vistory_fixture"
        )
    runs = layout.read_outputs(outputs, latest=latest)
    if not runs:
        raise EvaluationError(
            f"{outputs}: no run found (expected <method>/<mode>/<lang>/<timestamp>/<story>/...)"
        )
    spec = {"name": "vistory", **options}
    return [
        _Source(run_label(key), run.path, run, dict(spec), where=str(run.path), kind="outputs")
        for key, run in runs.items()
    ]


def siblings_of(sources: Sequence[_Source]) -> dict[str, tuple[layout.OutputRun, ...]]:
    """Per source's system, the runs of its method, mode and language among ``sources`` (every
    timestamp, whether each is its own job directory or a folder of one outputs tree), oldest
    first: the Inception Score of a split pools their stories, as the official lite/full CSVs
    do."""
    level: dict[tuple[str, str, str], list[layout.OutputRun]] = {}
    for source in sources:
        key = source.run.key
        level.setdefault((key.method, key.mode, key.language), []).append(source.run)
    return {
        s.system: tuple(
            sorted(
                level[(s.run.key.method, s.run.key.mode, s.run.key.language)],
                key=lambda run: run.key.timestamp,
            )
        )
        for s in sources
    }


def run_label(key: layout.RunKey) -> str:
    """A scored run's ``system`` in the scores table: ``<method>/<mode>/<lang>/<timestamp>``,
    the same whichever runs are scored with it (rows merged over several evaluations stay one
    run's) and whether it is read from a job directory or an outputs tree."""
    return "/".join(key)


def vistory_fixture_name() -> str:
    from omnistory_vistorybench.shots import FIXTURE_DATASET

    return FIXTURE_DATASET


# -- the dataset ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Dataset:
    spec: dict[str, Any]
    stories: list[records.Story]
    records: list[records.ShotRecord]
    english: dict[str, records.Story]
    fingerprint: str


def _dataset(cache: dict[str, _Dataset], source: _Source) -> _Dataset:
    """The dataset of one run in its language (loaded once per distinct spec), checked against
    the fingerprint its job recorded."""
    import json

    from omnistory_vistorybench.shots import load_dataset

    clean = {**source.spec, "language": source.run.key.language}
    cache_key = json.dumps(clean, sort_keys=True, default=str)
    if cache_key not in cache:
        loaded = load_dataset(clean)
        english = loaded.stories
        if clean.get("language") != "en":
            english = load_dataset({**clean, "language": "en"}).stories
        cache[cache_key] = _Dataset(
            loaded.spec,
            loaded.stories,
            loaded.records,
            {s.id: s for s in english},
            loaded.fingerprint,
        )
    data = cache[cache_key]
    expected = source.fingerprint
    if expected and expected != data.fingerprint:
        raise EvaluationError(
            f"{source.where}: the dataset at {data.spec['root']} is not the one this job ran on"
            f" (fingerprint {data.fingerprint[:12]} != {expected[:12]}); pass"
            " dataset.root=DIR to score against another copy"
        )
    return data


__all__ = ["EvaluationError", "run_label", "siblings_of", "vistory_fixture_name"]
