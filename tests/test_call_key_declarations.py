"""What a component declares that changes what a call returns decides whether a stored record is
reused: its ``reads`` and output parameters are hashed into the call key, and a backbone's
``produces`` is bound to each record it writes, so fixing a wrong ``produces`` (no version bump)
recomputes the calls and the run reports what the current code does, while a backbone whose
declaration did not change keeps its keys and records (stores of earlier versions are reused).

``produces`` is not hashed into the key: every backbone declares one, so hashing it would change
the key of every backbone call ever stored (tests/test_store_reuse.py pins them); a record made
under another ``produces`` is recomputed in place instead, as a record under another key would be.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omnistory_testkit import demo_items, run_cli
from test_output_checks import write_plugin

from omnistory_core.components import Backbone, BackboneOutput
from omnistory_core.engine.stage import (
    ComponentStats,
    LazyComponent,
    StageItem,
    item_key,
    needs_recompute,
    run_stage,
)
from omnistory_core.engine.store import CallRecord, Store

QUIET = "engine.progress=false"
PACKAGE = "omnistory_drifting"

HOOKS = """
from omnistory_core.api import hookimpl


@hookimpl
def register_backbones(register):
    from omnistory_drifting.backbone import Drifting

    register(Drifting)
"""

BACKBONE = """
from omnistory_core.api import Backbone, BackboneOutput

SPEECH = {"utterance": "Look!", "speaker": "Pip", "emotion": "happy", "speed": "normal",
          "pitch": "normal", "gender": "male"}


class Drifting(Backbone):
    name = "drifting"
    version = "1"
    produces = frozenset(PRODUCES)
    reads = ("current_image", "current_text")
    parameters = ()

    def run_one(self, item):
        # the model draws and narrates; it never spoke, whatever the declaration said
        page = item["current_image"].open_image()
        return BackboneOutput(text="A page.", image=page, plan={"speech": SPEECH})
"""


def install(tmp_path: Path, produces: set[str]) -> None:
    source = BACKBONE.replace("PRODUCES", repr(sorted(produces)))
    write_plugin(
        tmp_path / "site",
        {f"{PACKAGE}/__init__.py": HOOKS, f"{PACKAGE}/backbone.py": source},
        dist="omnistory-drifting",
        package=PACKAGE,
    )


def run(tmp_path: Path, *args: str):
    env = {"PYTHONPATH": str(tmp_path / "site"), "PYTHONDONTWRITEBYTECODE": "1"}
    return run_cli(
        "backbone=drifting", "dataset.limit=2", "output_root=out", QUIET, *args,
        cwd=tmp_path, env=env,
    )  # fmt: skip


def calls(job: Path) -> dict[str, int]:
    return json.loads((job / "stats.json").read_text())["components"]["backbone/drifting"]


def stored(tmp_path: Path) -> list[Path]:
    """The backbone's records in the store (the TTS expert's are beside them)."""
    paths = sorted((tmp_path / "out/store/calls").glob("*/*.json"))
    return [p for p in paths if json.loads(p.read_text())["component"] == "backbone/drifting"]


def test_fixing_produces_recomputes_and_reports_the_current_code(tmp_path: Path) -> None:
    # the author declares speech the model never makes: each call records the missing speech
    install(tmp_path, {"text", "image", "speech"})
    first = run(tmp_path)
    assert first.returncode == 0, first.stderr
    omni = tmp_path / "out/runs/demo/drifting"
    assert (omni / "missing.txt").read_text().splitlines() == [
        f"{i}\tspeech\tbackbone_no_speech\tbackbone/drifting returned no speech" for i in range(2)
    ]
    keys = [p.stem for p in stored(tmp_path)]
    assert len(keys) == 2

    # ... fixes the declaration (no version bump) and lets a TTS expert speak the plan
    install(tmp_path, {"text", "image"})
    fixed = run(tmp_path, "tts=noop")
    assert fixed.returncode == 0, fixed.stderr
    ti = tmp_path / "out/runs/demo/drifting-noop"
    assert calls(ti)["calls"] == 2 and calls(ti)["cache_hits"] == 0  # recomputed, not reused
    assert (ti / "missing.txt").read_text() == ""
    assert "returned no speech" not in fixed.stdout + fixed.stderr
    assert (ti / "speech/1/generated.wav").is_file()
    # the same calls, under the same keys: the records are rewritten, not added
    assert [p.stem for p in stored(tmp_path)] == keys
    record = json.loads(stored(tmp_path)[0].read_text())
    assert record["declared"] == {"produces": ["image", "text"]}

    # an unchanged declaration reuses every record
    again = run(tmp_path, "tts=noop")
    assert again.returncode == 0, again.stderr
    assert calls(ti)["calls"] == 0 and calls(ti)["cache_hits"] == 2

    # and going back recomputes again: the message is about the code that runs now
    install(tmp_path, {"text", "image", "speech"})
    back = run(tmp_path)
    assert back.returncode == 0, back.stderr
    assert calls(omni)["calls"] == 2
    assert len((omni / "missing.txt").read_text().splitlines()) == 2


# -- records written before records kept their declaration ----------------------------------
class Talker(Backbone):
    name = "talker-test"
    version = "1"
    produces = frozenset({"text", "image", "speech"})
    reads = ("current_text",)

    def run_one(self, item: dict[str, Any]) -> BackboneOutput:
        return BackboneOutput(text="A page.")  # no image, no speech


class QuietTalker(Talker):
    """The same backbone (name, version, reads) after its ``produces`` was fixed."""

    produces = frozenset({"text"})


def _stage(cls: type[Backbone], store: Store) -> ComponentStats:
    stats = ComponentStats()
    items = [StageItem(i, {"current_text": t["current_text"]}) for i, t in enumerate(ITEMS)]
    run_stage(LazyComponent(cls(seed=0), stats), items, store, retry_failures="errors")
    return stats


ITEMS = demo_items(2)


def _as_an_earlier_version_wrote_it(store: Store) -> None:
    for path in (store.root / "calls").glob("*/*.json"):
        data = json.loads(path.read_text())
        data.pop("declared")
        path.write_text(json.dumps(data))


def test_a_record_of_an_earlier_version_is_judged_by_what_it_holds(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    assert _stage(Talker, store).calls == 2
    _as_an_earlier_version_wrote_it(store)
    # the same declaration: its failures (backbone_no_image, backbone_no_speech) fit it, reused
    assert _stage(Talker, store).calls == 0
    # a fixed one: the record says it was made expecting image and speech, so it is recomputed
    assert _stage(QuietTalker, store).calls == 2
    assert _stage(QuietTalker, store).calls == 0


def test_the_declaration_is_not_in_the_key_but_reads_and_parameters_are() -> None:
    inputs = {"current_text": ITEMS[0]["current_text"]}
    # an unchanged backbone keeps the key earlier versions stored its calls under
    assert item_key(Talker(seed=0), inputs) == item_key(QuietTalker(seed=0), inputs)
    assert item_key(Talker(seed=0), inputs) != item_key(Talker(seed=1), inputs)
    assert item_key(Talker(seed=0), inputs) != item_key(
        Talker(seed=0), {**inputs, "metadata": ITEMS[0]["metadata"]}
    )
    assert Talker.call_declaration() == {"produces": ["image", "speech", "text"]}
    # a record of another declaration is recomputed whatever retry_failures says, as a record
    # under another key would be; one of the same declaration is left to the mode
    record = CallRecord(
        key="k",
        component="backbone/talker-test",
        status="ok",
        output={"text": "A page.", "failures": {}},
        declared={"produces": ["text"]},
    )
    assert needs_recompute(record, "none", None, Talker.call_declaration())
    assert not needs_recompute(record, "none", None, QuietTalker.call_declaration())
