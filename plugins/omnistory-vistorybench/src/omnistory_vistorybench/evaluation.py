"""What the evaluation runner scores for ViStoryBench: the task's ``evaluation``.

:func:`task_evaluation` turns ViStoryBench runs into the units the evaluators score, one list per
scope (the core's :class:`omnistory_core.tasks.Task` ``evaluation`` contract):

========  ===================  ===========================================================
scope     ``example_id``       pool (the names the metrics ``reads``; see ``metrics._common``)
========  ===================  ===========================================================
item      the shot id          ``candidate_image`` (the shot's image), ``shot`` (its texts and
          (``"01_03"``)        onstage characters)
group     the story id         ``candidate_shots`` (``{index: Media | None}`` over the story's
          (``"01"``)           shots), ``story_images`` (every shot image of the story folder),
                               ``characters`` (``{key: {name, name_en, tag, refs}}``),
                               ``shots``, ``character_images`` (the images of its ``chars/``)
run       ``""``, ``"lite"``   ``candidate_images`` (the split's shot images, every timestamp
                               of the method, mode and language pooled), ``run_images`` (this
                               run's own shot images of that split's stories)
========  ===================  ===========================================================

A run unit's ``example_id`` names the split its images cover: ``""`` is the run's own split (the
dataset's stories) and ``"lite"`` its lite stories
(:data:`omnistory_vistorybench.dataset.LITE_STORY_IDS`).  A *full run* (its dataset's stories
include lite stories and others) gets both, and the report ranks it on both.  The published
tables' Inception Score is the official ``utils/add_inception_score_to_result_csv.py``
recomputation: every timestamp folder of the method, mode and language read together (a story
folder of a later timestamp replacing an earlier one), the shot images of the split's stories
(``.png``, ``.jpg``, ``.jpeg``); ``candidate_images`` is that list.  ``run_images`` is what the
official ``bench_run.py`` summary scores instead (the run's output folder; for ``""`` every story
in it, whatever the split): ``metric.diversity.images=run`` scores it.

An input is *missing* when the run has no output for it: a shot without an image
(``candidate_image``), a story without any image in its folder (``candidate_shots``,
``story_images``), a run without any image (``candidate_images``).  A story whose folder has
images but none at a story.json index is not skipped, as the official driver does not skip it:
its group unit is scored (CIDS's values are then 0, as the official's) and its shots reach the
item metrics with ``candidate_image`` None and :data:`UNINDEXED` set in ``shot`` (prompt
alignment scores them 0, so the story mean is the official 0; ``faithful=false`` leaves them
out as ``invalid`` rows).  The runner gives an
evaluator that reads a missing input ``missing_output`` rows and makes no call, which is the
official driver's rule of skipping a story without outputs.

Runs come from two places, read the same way (:func:`omnistory_vistorybench.layout.read_outputs`):

* job directories of this task (``manifest.json`` with ``task.name: vistorybench``): one run
  each; the dataset is the manifest's (``dataset`` options given on the command line override
  it, e.g. a moved ``root``);
* an external outputs tree in either official layout (methods that ran elsewhere): every
  (method, mode, language, timestamp) run; the dataset comes from the ``dataset`` options (the
  run's language is its folder's).

Every run is scored as the system ``<method>/<mode>/<lang>/<timestamp>`` (:func:`run_label`):
the report averages a method's runs per (method, mode) as the official leaderboard does, from
the levels :meth:`EvaluatedSystem.to_dict` records in ``systems.json``.

Shot texts are given in English and in the run's language (``{"en": ..., "ch": ...}``): the
official evaluators score every run against the English text (``faithful``), the alternative
reads the run's language.  ``character_key`` lists the shot's defined characters followed by any
key it lists that the story does not define (so CIDS can apply its rule for those).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnistory_core.api import ConfigError, UserError
from omnistory_core.kit.jobs import MediaHasher
from omnistory_vistorybench import dataset as vistory
from omnistory_vistorybench import layout
from omnistory_vistorybench.metrics._common import UNINDEXED
from omnistory_vistorybench.task import VISTORYBENCH

#: scope -> the candidate inputs a unit of that scope may lack
CANDIDATE_INPUTS: dict[str, tuple[str, ...]] = {
    "item": ("candidate_image",),
    "group": ("candidate_shots", "story_images"),
    "run": ("candidate_images",),
}
#: the ``example_id`` of a full run's unit over its lite stories' images (``""``: the whole run)
LITE_RUN_UNIT = "lite"
#: the shot text fields given to the metrics (the official loader's names)
TEXT_FIELDS: tuple[str, ...] = ("plot", "scene", "camera", "script")


class EvaluationError(UserError):
    """ViStoryBench runs that cannot be evaluated (one line naming the folder or file)."""


@dataclass(frozen=True)
class Unit:
    """One thing an evaluator of some scope scores: its system, its ``example_id`` (shot id,
    story id or ``""``), its inputs and the candidate inputs it lacks."""

    system: str
    example_id: str
    pool: dict[str, Any]
    missing: frozenset[str] = frozenset()


@dataclass(frozen=True)
class EvaluatedSystem:
    """One run scored as a system: where it lies, its official run key and its dataset."""

    system: str
    path: Path
    run: layout.RunKey
    spec: dict[str, Any]
    fingerprint: str
    store: str | None = None
    story_ids: tuple[str, ...] = ()
    source: str = "job"

    def to_dict(self) -> dict[str, Any]:
        """What the evaluation records of this run (``systems.json``): the report reads the
        official levels, split and stories of each scored system from it."""
        return {
            "system": self.system,
            "path": str(self.path),
            "source": self.source,
            "method": self.run.method,
            "mode": self.run.mode,
            "language": self.run.language,
            "timestamp": self.run.timestamp,
            "split": str(self.spec.get("split") or "full"),
            "story_ids": list(self.story_ids),
            "dataset": self.spec.get("name"),
            "fingerprint": self.fingerprint,
        }


@dataclass
class TaskEvaluation:
    """The runs to score and their units per scope (what the evaluation runner iterates)."""

    systems: list[EvaluatedSystem]
    units: dict[str, list[Unit]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def store(self) -> str | None:
        """The store the job directories recorded (the first one's), or None."""
        return next((s.store for s in self.systems if s.store), None)

    def scoped(self, scope: str) -> list[Unit]:
        return self.units.get(scope, [])

    def planned_requests(self, evaluator: Any, unit: Unit) -> tuple[int, bool] | None:
        """The judge requests one call of ``evaluator`` on ``unit`` makes, and whether that is an
        upper bound (the dry run's count; None: an evaluator that asks no judge)."""
        if evaluator.kind != "metric":
            return None
        if evaluator.name == "prompt_align":
            # one question per dimension of a shot with an image (scene, camera, character_action)
            image = unit.pool.get("candidate_image")
            return (len(evaluator.criteria) if image is not None else 0), False
        if evaluator.name == "cids" and "single_character_action" in evaluator.criteria:
            if not evaluator.params.get("judge_base_url"):
                return 0, False
            # one per matched crop; before running only the onstage characters are known
            return shot_characters(unit), True
        return None

    def request_notes(self, evaluators: Iterable[Any], rows: Mapping[str, Any]) -> list[str]:
        """What the dry run's ``requests`` of the ViStoryBench judges count."""
        notes = []
        for evaluator in evaluators:
            row = rows.get(evaluator.key()) or {}
            if evaluator.kind != "metric":
                continue
            if evaluator.name == "prompt_align":
                notes.append(
                    f"{evaluator.key()}: {row.get('requests', 0)} judge request(s) in"
                    f" {row.get('calls', 0)} call(s): 3 per shot with an output (scene, camera,"
                    " character_action); an answer that does not parse is asked again (up to"
                    " max_tries), which is not counted."
                )
            elif evaluator.name == "cids" and "single_character_action" in evaluator.criteria:
                if not evaluator.params.get("judge_base_url"):
                    notes.append(
                        f"{evaluator.key()}: no single_character_action judge request"
                        " (judge_base_url is not set: the criterion is not produced)."
                    )
                    continue
                notes.append(
                    f"{evaluator.key()}: at most {row.get('requests', 0)}"
                    " single_character_action judge request(s), an upper bound: one per"
                    " matched character crop, and matching is unknown before running, so each"
                    " onstage character of each shot with an output is counted once."
                )
        return notes


# -- the entry point ------------------------------------------------------------------------------


def task_evaluation(
    job_dirs: Iterable[Any], config: Mapping[str, Any] | None = None
) -> TaskEvaluation:
    """The units of ``job_dirs`` (complete job directories of this task: paths, or objects with
    a ``path``) and of ``config["outputs"]`` (an external outputs tree, optional).

    ``config`` keys: ``outputs`` (a folder in either official layout), ``dataset`` (dataset
    options: ``name``, ``root``, ``split``, ``stories``; they override a manifest's),
    ``latest`` (read only the newest timestamp subfolder of a story folder, as the official
    reader's own default; the official driver merges them all, the default here), ``planned``
    (job directories a dry-run sweep planned: their ``dry_run.json`` gives each shot's image).
    Raises :class:`EvaluationError` or :class:`~omnistory_core.api.ConfigError` in one line."""
    config = dict(config or {})
    options = dict(config.get("dataset") or {})
    latest = bool(config.get("latest", False))
    found: list[_Source] = []
    # jobs a dry-run sweep planned are read from their plan, not from what an earlier run left
    planned = [Path(str(p)) for p in config.get("planned") or []]
    rewritten = {p.resolve() for p in planned}
    for job in job_dirs:
        if Path(getattr(job, "path", job)).resolve() not in rewritten:
            found.append(_job_run(Path(getattr(job, "path", job)), options, latest))
    if planned:
        from omnistory_vistorybench.dryrun import planned_source

        found.extend(planned_source(path, options) for path in planned)
    outputs = config.get("outputs")
    if outputs:
        found.extend(_tree_runs(Path(str(outputs)), options, latest))
    if not found:
        raise EvaluationError("no ViStoryBench run to evaluate")
    names = [f.system for f in found]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise EvaluationError(
            f"several runs are the same official run {dupes} (method/mode/lang/timestamp):"
            " evaluate them separately, or move one"
        )
    media = MediaHasher()
    datasets: dict[str, _Dataset] = {}
    result = TaskEvaluation(systems=[], units={scope: [] for scope in CANDIDATE_INPUTS})
    siblings = siblings_of(found)
    for source in found:
        data = _dataset(datasets, source)
        result.systems.append(
            EvaluatedSystem(
                source.system,
                source.path,
                source.run.key,
                data.spec,
                data.fingerprint,
                source.store,
                tuple(story.id for story in data.stories),
                source.kind,
            )
        )
        if source.planned is not None:
            from omnistory_vistorybench.dryrun import PlannedMedia

            shots: Any = PlannedMedia(source.planned, media)  # the planned images, by path
        else:
            shots = media
        pooled = siblings.get(source.system) or (source.run,)
        for scope, units in run_units(source.system, source.run, data, shots, pooled).items():
            result.units[scope].extend(units)
    return result


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
    #: a job a dry-run sweep planned (:func:`omnistory_vistorybench.dryrun.planned_source`): shot
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
    if task != VISTORYBENCH.name:
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
    from omnistory_vistorybench.generate import FIXTURE_DATASET

    return FIXTURE_DATASET


# -- the dataset ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Dataset:
    spec: dict[str, Any]
    stories: list[vistory.Story]
    records: list[vistory.ShotRecord]
    english: dict[str, vistory.Story]
    fingerprint: str


def _dataset(cache: dict[str, _Dataset], source: _Source) -> _Dataset:
    """The dataset of one run in its language (loaded once per distinct spec), checked against
    the fingerprint its job recorded."""
    import json

    from omnistory_vistorybench.generate import load_dataset

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


# -- units ----------------------------------------------------------------------------------------


def shot_fields(story: vistory.Story, shot: vistory.Shot, english: vistory.Story | None) -> dict:
    """A shot as the metrics read it: index, onstage keys, texts in English and the run's
    language."""
    en_shot = _find_shot(english, shot.index)
    texts: dict[str, Any] = {}
    for name in TEXT_FIELDS:
        value = {story.language: getattr(shot, name)}
        if en_shot is not None:
            value["en"] = getattr(en_shot, name)
        texts[name] = value
    return {
        "story_id": story.id,
        "index": shot.index,
        "character_key": [*shot.character_keys, *shot.undefined_keys],
        "character_names": list(shot.character_names),
        **texts,
    }


def _find_shot(story: vistory.Story | None, index: int) -> vistory.Shot | None:
    if story is None:
        return None
    try:
        return story.shot(index)
    except KeyError:
        return None


def story_characters(story: vistory.Story, media: MediaHasher) -> dict[str, dict[str, Any]]:
    return {
        key: {
            "name": c.name or c.name_en or key,
            # the official's evaluators reload stories in English: their judge is told this one
            "name_en": c.name_en or c.name or key,
            "tag": c.tag,
            "refs": [media(str(p)) for p in c.images],
        }
        for key, c in story.characters.items()
    }


def run_units(
    system: str,
    run: layout.OutputRun,
    data: _Dataset,
    media: MediaHasher,
    siblings: Iterable[layout.OutputRun] = (),
) -> dict[str, list[Unit]]:
    """The item, group and run units of one run over its dataset; ``siblings`` are the runs
    whose stories the Inception Score pools (default: this one)."""
    items: list[Unit] = []
    groups: list[Unit] = []
    for story in data.stories:
        out = run.stories.get(story.id)
        shots_out = out.shots if out is not None else {}
        english = data.english.get(story.id)
        # images in the story's folder, none at a story.json index: the official scores the
        # story (0 where nothing can be scored); only a story without any image is skipped
        unindexed = bool(shots_out) and not any(s.index in shots_out for s in story.shots)
        candidate_shots: dict[int, Any] = {}
        fields = []
        for shot in story.shots:
            path = shots_out.get(shot.index)
            image = media(str(path)) if path is not None else None
            candidate_shots[shot.index] = image
            shot_dict = shot_fields(story, shot, english)
            fields.append(shot_dict)
            pool: dict[str, Any] = {"shot": shot_dict}
            missing: set[str] = set()
            if unindexed:
                shot_dict[UNINDEXED] = True
                pool["candidate_image"] = None
            elif image is None:
                missing.add("candidate_image")
            else:
                pool["candidate_image"] = image
            items.append(Unit(system, shot.id, pool, frozenset(missing)))
        story_images = [media(str(p)) for p in shots_out.values()]
        group_pool = {
            "candidate_shots": candidate_shots,
            "story_images": story_images,
            # the method's own character images (chars/), CIDS's references with ref_mode=mid-gen
            "character_images": [media(str(p)) for p in (out.chars if out else {}).values()],
            "characters": story_characters(story, media),
            "shots": fields,
        }
        lacking = set()
        if not any(v is not None for v in candidate_shots.values()) and not unindexed:
            lacking.add("candidate_shots")
        if not story_images:
            lacking.add("story_images")
        groups.append(Unit(system, story.id, group_pool, frozenset(lacking)))
    pooled = pooled_stories(list(siblings) or [run])
    ids = [s.id for s in data.stories]
    # the official CSVs' IS: every timestamp pooled, the dataset's stories of the split; the
    # run's own images (bench_run.py: every story of its output folder) beside it
    runs = [_images_unit(system, "", ids, pooled, list(run.stories), run, media)]
    if _is_full_run(data.stories):
        # the official lite CSV's IS is recomputed over the lite stories' images only
        lite = [sid for sid in ids if sid in vistory.LITE_STORY_IDS]
        own = [sid for sid in run.stories if sid in vistory.LITE_STORY_IDS]
        runs.append(_images_unit(system, LITE_RUN_UNIT, lite, pooled, own, run, media))
    return {"item": items, "group": groups, "run": runs}


def pooled_stories(runs: Iterable[layout.OutputRun]) -> dict[str, layout.StoryOutputs]:
    """The stories of several runs merged by id, a later run's folder replacing an earlier
    one's (the official reader lets the last timestamp its directory listing returns win; here
    the runs come oldest first, so the newest wins)."""
    merged: dict[str, layout.StoryOutputs] = {}
    for run in runs:
        merged.update(run.stories)
    return merged


def _is_full_run(stories: Iterable[vistory.Story]) -> bool:
    """Whether a run's stories mix lite stories and others (it is then ranked on both splits)."""
    lite = [s.id in vistory.LITE_STORY_IDS for s in stories]
    return any(lite) and not all(lite)


#: the image files the official Inception Score recomputation reads
IS_EXTENSIONS = (".png", ".jpg", ".jpeg")


def _images_unit(
    system: str,
    example_id: str,
    story_ids: Iterable[str],
    pooled: Mapping[str, layout.StoryOutputs],
    own_ids: Iterable[str],
    run: layout.OutputRun,
    media: MediaHasher,
) -> Unit:
    """A run-scope unit: ``candidate_images``, the shot images of ``story_ids`` in the pooled
    stories (``.png``/``.jpg``/``.jpeg``, sorted by path, as the official recomputation reads
    them), and ``run_images``, those of ``own_ids`` in this run (output folder order); it lacks
    ``candidate_images`` when the pool has none."""
    wanted = set(story_ids)
    paths = sorted(
        str(p)
        for sid, story in pooled.items()
        if sid in wanted
        for p in story.shots.values()
        if p.suffix.lower() in IS_EXTENSIONS
    )
    images = [media(p) for p in paths]
    own = [media(str(p)) for sid in own_ids for p in run.stories[sid].shots.values()]
    missing = frozenset() if images else frozenset({"candidate_images"})
    return Unit(system, example_id, {"candidate_images": images, "run_images": own}, missing)


def shot_characters(unit: Unit) -> int:
    """The onstage characters of a group unit's shots that have an output (the dry run's upper
    bound on single-character action questions: one per matched crop)."""
    shots = unit.pool.get("candidate_shots") or {}
    return sum(
        len(s.get("character_names") or [])
        for s in unit.pool.get("shots") or []
        if shots.get(int(s["index"])) is not None
    )


__all__ = [
    "CANDIDATE_INPUTS",
    "EvaluatedSystem",
    "EvaluationError",
    "LITE_RUN_UNIT",
    "TaskEvaluation",
    "UNINDEXED",
    "Unit",
    "run_label",
    "run_units",
    "shot_characters",
    "shot_fields",
    "task_evaluation",
]
