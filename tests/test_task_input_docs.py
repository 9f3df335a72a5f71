"""Each task documents its inputs from its declaration: ``tasks --inputs TASK`` prints the
declared table, the declaration matches what the task's job actually hands a component, and
CONTRIBUTING.md shows both first-party tasks' tables as generated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omnistory_core.cli_plugins import tasks_main
from omnistory_core.plugins import load_plugins
from omnistory_core.task_inputs import inputs_block, inputs_table, readable

ROOT = Path(__file__).resolve().parents[1]


def _task(name: str):
    return load_plugins().task(name)


def test_tasks_inputs_vistorybench_prints_its_declaration(capsys: pytest.CaptureFixture) -> None:
    task = _task("vistorybench")
    assert tasks_main(["--inputs", "vistorybench"]) == 0
    out = capsys.readouterr().out
    assert inputs_table(task) in out
    rows = [line for line in out.splitlines() if line.startswith("| `")]
    # one row per declared input and per documented key of a dict input, nothing else
    declared = sum(1 + len(d.keys) for d in task.input_docs)
    assert len(rows) == declared, (len(rows), declared)
    for doc in task.input_docs:
        assert any(r.startswith(f"| `{doc.name}` |") for r in rows), doc.name
    # every name a task accepts is documented, and which one is the official merged prompt
    assert set(task.inputs) | set(task.reference_inputs) <= {d.name for d in task.input_docs}
    (shot_prompt,) = [r for r in rows if r.startswith("| `shot_prompt` |")]
    assert "OFFICIAL MERGED PROMPT" in shot_prompt and "story_prompt_merge" in shot_prompt

    assert tasks_main(["--inputs", "vistorybench", "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert [d["name"] for d in as_json] == [d.name for d in task.input_docs]

    assert tasks_main(["--inputs", "vistroybench"]) == 2
    assert "vistroybench" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["image", "backbone", "planner"])
def test_the_declaration_matches_what_a_vistorybench_job_hands_a_component(kind: str) -> None:
    """The documented inputs of a kind, and each dict's documented keys, are exactly those the
    task's job builds for a shot of its fixture."""
    from omnistory_testkit import fixture_items

    task = _task("vistorybench")
    # a name may be declared once for generation and once per evaluator scope
    docs = {d.name: d for d in task.input_docs if kind in d.kinds}
    items = fixture_items("vistorybench", kind=kind, per_group=1)
    assert items
    allowed = set(readable(task.input_docs, kind))
    for example_id, item in items.items():
        assert allowed <= set(item), (example_id, sorted(allowed - set(item)))
        for name in allowed:
            keys = {k.name for k in docs[name].keys}
            value = item[name]
            if not keys or value in (None, []):
                continue
            dicts = value if isinstance(value, list) else [value]
            for d in dicts:
                assert set(d) == keys, (example_id, name, sorted(set(d) ^ keys))


@pytest.mark.parametrize("name", ["omnistorybench", "vistorybench"])
def test_contributing_shows_each_task_table_as_generated(name: str) -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    assert inputs_block(_task(name)) in text, (
        f"CONTRIBUTING.md's {name} input table is stale: python -m omnistory_core.task_inputs"
        " CONTRIBUTING.md"
    )
