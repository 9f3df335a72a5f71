"""The engine checks what every component returns, through the real CLI: a value of the wrong type
(an image as a numpy array, speech as a list, a backbone's narration as a number) or a modality a
backbone does not declare in ``produces`` is that example's ``contract_error`` failure, with one
message naming the field, the type expected and the one returned, and the ``file:line`` of the
method that returned it; the sweep goes on, and fixing the code is enough for the next run.  The
accepted forms (a ``Media`` image or sound file, a ``Plan``) are stored like the usual ones.

The plugin is a real installed distribution (a ``.dist-info`` next to its package, on PYTHONPATH);
``write_plugin`` is shared with the other tests of the engine's contract.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from omnistory_testkit import run_cli

QUIET = "engine.progress=false"
PACKAGE = "omnistory_probe"

HOOKS = """
from omnistory_core.api import hookimpl


@hookimpl
def register_planners(register):
    from omnistory_probe.components import ProbePlanner

    register(ProbePlanner)


@hookimpl
def register_image_experts(register):
    from omnistory_probe.components import ProbeImage

    register(ProbeImage)


@hookimpl
def register_tts_experts(register):
    from omnistory_probe.components import ProbeTTS

    register(ProbeTTS)


@hookimpl
def register_backbones(register):
    from omnistory_probe.components import ProbeBackbone

    register(ProbeBackbone)
"""

#: what each component returns is chosen by PROBE_MODE, so one installed plugin covers every case
COMPONENTS = """
import os

import numpy as np

from omnistory_core.api import (
    Audio, Backbone, BackboneOutput, ImageExpert, Media, Planner, TTSExpert,
)
from omnistory_core.contract import Plan, SpeechTarget

SPEECH = {"utterance": "Look!", "speaker": "Pip", "emotion": "happy", "speed": "normal",
          "pitch": "normal", "gender": "male"}


def mode():
    return os.environ.get("PROBE_MODE", "")


class ProbePlanner(Planner):
    name = "probe"
    version = "1"
    reads = ("current_text",)
    parameters = ()

    def run_one(self, item):  # PLANNER RUN
        if mode() == "planner-int":
            return 42
        return Plan("The fox runs on.", "a fox in a meadow", SpeechTarget(**SPEECH))


class ProbeImage(ImageExpert):
    name = "probe"
    version = "1"
    reads = ("image_prompt", "current_image")
    parameters = ()

    def run_one(self, item):  # IMAGE RUN
        if mode() == "image-array":
            return np.zeros((8, 8, 3), dtype=np.uint8)
        return item["current_image"]  # a Media: accepted as the illustration


class ProbeTTS(TTSExpert):
    name = "probe"
    version = "1"
    parameters = ()

    def run_one(self, item):  # TTS RUN
        if mode() == "speech-list":
            return [0.0, 0.1, 0.2]
        if mode() == "speech-rate":
            return Audio(np.zeros(800, dtype=np.float32), "16k")
        return Media(os.environ["PROBE_WAV"], "0" * 64)  # a sound file: accepted as the speech


class ProbeBackbone(Backbone):
    name = "probe"
    version = "1"
    produces = frozenset({"text", "image"})
    reads = ("current_image", "current_text")
    parameters = ()

    def run_one(self, item):  # BACKBONE RUN
        page = item["current_image"].open_image()
        out = BackboneOutput(text="A page.", image=page, plan={"speech": SPEECH})
        if mode() == "backbone-extra-speech":
            out.speech = Audio(np.zeros(800, dtype=np.float32), 16000)
        if mode() == "backbone-int-text":
            out.text = 7
        return out
"""


def write_plugin(
    site: Path,
    files: dict[str, str],
    *,
    dist: str = "omnistory-probe",
    package: str = PACKAGE,
    requires: tuple[str, ...] = (),
) -> None:
    """A distribution as pip leaves it in ``site``: ``.dist-info`` (METADATA with its
    ``Requires-Dist`` lines, the ``omnistory`` entry point, RECORD) and ``files`` (relative path
    -> source, dedented).  Rewriting a file is how a test edits the plugin between runs."""
    info = site / f"{dist.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    metadata = [f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1.0"]
    metadata += [f"Requires-Dist: {r}" for r in requires]
    metadata += sorted({f"Provides-Extra: {e}" for e in _extras(requires)})
    (info / "METADATA").write_text("\n".join(metadata) + "\n")
    (info / "entry_points.txt").write_text(f"[omnistory]\n{package} = {package}\n")
    record = []
    for relative, text in files.items():
        path = site / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        record.append(f"{relative},,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


def _extras(requires: tuple[str, ...]) -> list[str]:
    return [r.split("extra ==")[1].strip(" '\"") for r in requires if "extra ==" in r]


def line_of(source: str, mark: str) -> int:
    """The 1-based line of ``source`` (as written, dedented) that holds ``mark``."""
    lines = textwrap.dedent(source).splitlines()
    return next(n for n, line in enumerate(lines, 1) if mark in line)


def cli(tmp_path: Path, *args: str, **env: str):
    env = {
        "PYTHONPATH": str(tmp_path / "site"),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PROBE_WAV": str(tmp_path / "line.wav"),
        **env,
    }
    # ``-m`` must come first: the caller's arguments lead
    return run_cli(*args, "dataset.limit=2", "output_root=out", QUIET, cwd=tmp_path, env=env)


def records(job: Path) -> list[dict]:
    return [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]


def stats(job: Path) -> dict:
    return json.loads((job / "stats.json").read_text())["components"]


def _setup(tmp_path: Path) -> None:
    import numpy as np
    import soundfile as sf

    write_plugin(tmp_path / "site", {f"{PACKAGE}/__init__.py": HOOKS,
                                     f"{PACKAGE}/components.py": COMPONENTS})  # fmt: skip
    t = np.arange(1600, dtype=np.float32) / 16000
    sf.write(tmp_path / "line.wav", 0.1 * np.sin(2 * np.pi * 220 * t), 16000)


WHERE = f"{PACKAGE}/components.py"


def test_an_image_array_is_refused_with_field_types_and_location_and_the_fix_is_enough(
    tmp_path: Path,
) -> None:
    _setup(tmp_path)
    proc = cli(tmp_path, "image=probe", "tts=noop", PROBE_MODE="image-array")
    assert proc.returncode == 0, proc.stderr
    assert "AttributeError" not in proc.stdout + proc.stderr
    job = tmp_path / "out/runs/demo/template-probe-noop"
    where = f"{WHERE}:{line_of(COMPONENTS, 'IMAGE RUN')}"
    message = (
        "image/probe returned numpy.ndarray for the image, expected a PIL.Image.Image, a Media or"
        " PNG bytes"
    )
    for row in records(job):
        assert row["image"]["category"] == "contract_error"
        assert row["image"]["message"] == message and row["image"]["where"] == where
        assert row["text"]["status"] == "ok" and row["speech"]["status"] == "ok"  # not the others
    missing = (job / "missing.txt").read_text().splitlines()
    assert missing == [f"{i}\timage\tcontract_error\t{message} (at {where})" for i in range(2)], (
        missing
    )
    console = proc.stdout + proc.stderr
    assert f"image  contract_error     2  {message} (at {where})" in console

    # the author fixes the code, no version bump: a plain re-run recomputes it
    fixed = cli(tmp_path, "image=probe", "tts=noop")
    assert fixed.returncode == 0, fixed.stderr
    assert stats(job)["image/probe"]["calls"] == 2
    assert (job / "missing.txt").read_text() == ""
    # the Media it now returns is the current page, stored as PNG
    from PIL import Image

    with Image.open(job / "image/0/generated.png") as img:
        assert img.format == "PNG" and img.size[0] > 8


def test_speech_of_the_wrong_type_names_the_field(tmp_path: Path) -> None:
    _setup(tmp_path)
    where = f"{WHERE}:{line_of(COMPONENTS, 'TTS RUN')}"
    cases = {
        "speech-list": "tts/probe returned list for the speech, expected an Audio (or a Media of a"
        " sound file)",
        "speech-rate": "tts/probe returned str for the speech.sample_rate, expected a positive int",
    }
    job = tmp_path / "out/runs/demo/template-copy-probe"
    for mode, message in cases.items():
        proc = cli(tmp_path, "tts=probe", PROBE_MODE=mode)
        assert proc.returncode == 0, proc.stderr
        rows = records(job)
        assert [r["speech"]["message"] for r in rows] == [message, message], mode
        assert {r["speech"]["where"] for r in rows} == {where}
        assert {r["speech"]["category"] for r in rows} == {"contract_error"}
    # a sound file returned as Media is the speech: decoded and written as the usual WAV
    ok = cli(tmp_path, "tts=probe")
    assert ok.returncode == 0, ok.stderr
    import soundfile as sf

    samples, rate = sf.read(job / "speech/0/generated.wav")
    assert rate == 16000 and len(samples) == 1600


def test_a_planner_may_return_a_plan_but_not_a_number(tmp_path: Path) -> None:
    _setup(tmp_path)
    job = tmp_path / "out/runs/demo/probe-copy-noop"
    bad = cli(tmp_path, "planner=probe", "tts=noop", PROBE_MODE="planner-int")
    assert bad.returncode == 0, bad.stderr  # the copied image is still made
    where = f"{WHERE}:{line_of(COMPONENTS, 'PLANNER RUN')}"
    message = "planner/probe returned int for its result, expected a PlannerResponse, str or Plan"
    assert {(r["text"]["message"], r["text"]["where"]) for r in records(job)} == {(message, where)}
    good = cli(tmp_path, "planner=probe", "tts=noop")
    assert good.returncode == 0, good.stderr
    assert (job / "text/1/generated.txt").read_text().strip() == "The fox runs on."
    plans = [json.loads(line) for line in (job / "plans.jsonl").read_text().splitlines()]
    assert plans[0]["plan"]["image_prompt"] == "a fox in a meadow"


def test_a_backbone_modality_outside_produces_is_refused_and_the_sweep_goes_on(
    tmp_path: Path,
) -> None:
    _setup(tmp_path)
    proc = cli(
        tmp_path,
        "-m",
        "backbone=probe",
        "tts=noop,espeak",
        "evaluation.report=false",
        PROBE_MODE="backbone-extra-speech",
    )
    # every output of both jobs is missing: the sweep says so at the end, having run both
    assert proc.returncode == 1, proc.stderr
    root = tmp_path / "out/sweeps/demo"
    where = f"{WHERE}:{line_of(COMPONENTS, 'BACKBONE RUN')}"
    message = (
        "backbone/probe returned Audio for BackboneOutput.speech but its produces is"
        " ['image', 'text']: declare 'speech' in produces, or return speech=None and put what an"
        " expert needs in the plan"
    )
    for system in ("probe-noop", "probe-espeak"):
        rows = records(root / system)
        assert len(rows) == 2
        for row in rows:
            for modality in ("text", "image", "speech"):
                entry = row[modality]
                # the expert's speech is blocked by the backbone's call: "plan failed: <why>"
                expected = message if modality != "speech" else f"plan failed: {message}"
                assert (entry["category"], entry["message"], entry["where"]) == (
                    "contract_error",
                    expected,
                    where,
                ), (system, modality)
    # one backbone call per example, shared by both systems (one record each in the store)
    assert len(list((tmp_path / "out/store/calls").glob("*/*.json"))) == 2

    text = cli(tmp_path, "backbone=probe", "tts=noop", PROBE_MODE="backbone-int-text")
    job = tmp_path / "out/runs/demo/probe-noop"
    assert text.returncode != 0
    assert {r["text"]["message"] for r in records(job)} == {
        "backbone/probe returned int for BackboneOutput.text, expected a str"
    }
    fixed = cli(tmp_path, "backbone=probe", "tts=noop")
    assert fixed.returncode == 0, fixed.stderr
    assert (job / "missing.txt").read_text() == ""
