"""Declared component parameters: validated once when the component is built (one line, exit 2
through the real CLI), config nodes generated from the declaration, listed by ``plugins``, and
cache keys unchanged for components that existed before the declarations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from omnistory_testing import load_json, run_cli

from omnistory_core.components import TTSExpert
from omnistory_core.engine.hashing import canonical_json
from omnistory_core.errors import ConfigError
from omnistory_core.params import Param, ParamError, resolve_params

QUIET = ("engine.progress=false", "dataset.limit=1", "output_root=out")


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("omnistory: error:")]


# -- the command line ---------------------------------------------------------------------------


def test_typo_forced_with_plusplus_is_one_line_exit_2(tmp_path: Path) -> None:
    pytest.importorskip("omnistory_parler")
    proc = run_cli("tts=parler", "image=noop", "++tts.voise=x", *QUIET, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert "tts=parler: unknown parameter(s) voise; known:" in line
    known = line.split("known:", 1)[1]
    assert "voice_hash" in known and "temperature" in known and "male_voices" in known
    assert not (tmp_path / "out" / "store").exists()  # refused before any call


def test_misspelt_key_gets_a_suggestion(tmp_path: Path) -> None:
    proc = run_cli("++tts.voulme=120", *QUIET, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = error_lines(proc.stderr)
    assert "tts=espeak: unknown parameter(s) voulme" in line and "voulme -> volume" in line
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "override,message",
    [
        ("tts.volume=loud", "tts=espeak: volume must be a number, got 'loud'"),
        ("tts.volume=300", "tts=espeak: volume must be <= 200, got 300"),
        ("tts.language=null", "tts=espeak: language must be a string, got null"),
        ("image.size=0", "image=noop: size must be >= 1, got 0"),
        ("planner.delay_s=true", "planner=noop: delay_s must be a number, got True"),
    ],
)
def test_wrong_type_or_value_is_one_line_exit_2(tmp_path: Path, override, message) -> None:
    proc = run_cli("planner=noop", "image=noop", override, *QUIET, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = error_lines(proc.stderr)
    assert message in line


def test_component_without_yaml_is_selectable_with_its_declared_defaults(tmp_path: Path) -> None:
    # no conf/tts/espeak.yaml, conf/image/noop.yaml or conf/planner/noop.yaml exist: the nodes
    # come from the declarations
    conf = Path(__file__).resolve().parents[1] / "omnistory_core" / "conf"
    assert not (conf / "tts" / "espeak.yaml").exists()
    assert not (conf / "image" / "noop.yaml").exists()
    proc = run_cli(
        "planner=noop", "image=noop", "tts=espeak", "tts.volume=120", "--cfg", "job", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "volume: 120" in proc.stdout and "wpm_slow: 130" in proc.stdout
    assert "language: en-us" in proc.stdout and "delay_s: 0.0" in proc.stdout
    proc = run_cli(
        "planner=noop", "image=noop", "tts=espeak", "image.size=16", *QUIET, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    manifest = load_json(tmp_path / "out" / "runs" / "demo" / "noop-noop-espeak" / "manifest.json")
    assert manifest["components"]["image"]["params"] == {"seed": 0, "size": 16}
    assert manifest["components"]["tts"]["params"]["wpm_normal"] == 170
    assert "delay_s" not in manifest["components"]["planner"]["params"]  # runtime


def test_plugin_yaml_is_laid_over_the_declaration(tmp_path: Path) -> None:
    pytest.importorskip("omnistory_parler")
    proc = run_cli("tts=parler", "tts.temperature=0.7", "--cfg", "job", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # from the yaml (an environment-variable default) and from the declaration, no `++` needed
    assert "model: ${oc.env:OMNISTORY_MODEL_TTS_PARLER" in proc.stdout
    assert "temperature: 0.7" in proc.stdout and "voice_hash: ours" in proc.stdout


def test_plugins_shows_the_parameters(tmp_path: Path) -> None:
    proc = run_cli("plugins", "--params", "tts=espeak", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "tts=espeak" in proc.stdout
    for word in ("wpm_slow", "float", "130", "words per minute for speed=slow", "batch_size"):
        assert word in proc.stdout
    proc = run_cli("plugins", "--params", "--json", "tts=espeak", "image=noop", cwd=tmp_path)
    rows = json.loads(proc.stdout)
    volume = next(r for r in rows["tts/espeak"] if r["name"] == "volume")
    assert volume == {
        "name": "volume",
        "type": "float",
        "default": 100,
        "doc": "base amplitude (0-200); emotions scale it",
        "runtime": False,
        "constraint": ">= 0; <= 200",
    }
    assert next(r for r in rows["image/noop"] if r["name"] == "delay_s")["runtime"] is True
    listing = json.loads(run_cli("plugins", "--json", cwd=tmp_path).stdout)
    builtin = next(p for p in listing if p["plugin"] == "builtin")
    assert [r["name"] for r in builtin["params"]["planner/template"]] == ["seed", "batch_size"]
    proc = run_cli("plugins", "--params", "tts=nope", cwd=tmp_path)
    assert proc.returncode == 2 and "no tts named 'nope'" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- cache keys -----------------------------------------------------------------------------------


def built(kind: str, name: str, **overrides: object):
    """A component built as a run builds it: its composed config node, then build_component."""
    from omnistory_eval.command import evaluator_config

    from omnistory_core.engine.job import build_component
    from omnistory_core.plugins import load_plugins

    spec = {**evaluator_config(kind, name, []), **overrides}
    return build_component(load_plugins(), kind, spec, seed=0, allow_oracle=False)


def test_cache_keys_at_the_defaults_are_those_written_before_the_declarations(monkeypatch):
    """The key parameters of a component built from its default config, as the code before
    declared parameters computed them (stores written then stay valid)."""
    monkeypatch.delenv("OMNISTORY_MODEL_TTS_PARLER", raising=False)
    before = {
        "image/noop": {"seed": 0},  # `size` was not in the key: it stays out at its default
        "planner/noop": {"seed": 0},
        "planner/template": {"seed": 0},
        "tts/noop": {"seed": 0},
    }
    for key, params in before.items():
        kind, name = key.split("/")
        assert built(kind, name).output_params() == params, key
    espeak = built("tts", "espeak").output_params()
    espeak.pop("espeakng_loader")
    assert canonical_json(espeak) == canonical_json(
        {
            "female_pitch": 50,
            "language": "en-us",
            "male_pitch": 50,
            "pitch_step": 15,
            "seed": 0,
            "volume": 100,
            "wpm_fast": 220,
            "wpm_normal": 170,
            "wpm_slow": 130,
        }
    )
    assert built("image", "noop", size=32).output_params() == {"seed": 0, "size": 32}


def test_parler_cache_key_at_the_defaults_is_unchanged(monkeypatch):
    pytest.importorskip("omnistory_parler")
    monkeypatch.delenv("OMNISTORY_MODEL_TTS_PARLER", raising=False)
    # computed by the code before declared parameters (hand-written DEFAULTS + full yaml)
    before = (
        '{"do_sample":true,"dtype":"float32","emotion_delivery":{"angry":"very expressive and'
        ' animated","happy":"very expressive and animated","neutral":"slightly expressive",'
        '"sad":"quite monotone"},"emotion_tone":{"angry":"angry and forceful","happy":"happy and'
        ' cheerful","neutral":"calm and even","sad":"sad and subdued"},"female_voices":["Lea",'
        '"Jenna","Laura"],"male_voices":["Jon","Gary","Mike"],"max_new_tokens":null,"model":'
        '"parler-tts/parler-tts-large-v1","pitch_phrases":{"high":"a high pitch","low":"a low'
        ' pitch","normal":"a moderate pitch"},"recording":"The recording is very clear audio'
        ' with almost no background noise.","revision":null,"seed":0,"speed_phrases":{"fast":'
        '"quite fast","normal":"at a moderate speed","slow":"quite slowly"},"temperature":1.0}'
    )
    assert canonical_json(built("tts", "parler").output_params()) == before
    changed = built("tts", "parler", voice_hash="official").output_params()
    assert changed["voice_hash"] == "official"


# -- the declaration itself -----------------------------------------------------------------------


class Toy(TTSExpert):
    name = "toy"
    parameters = (
        Param("model", str, "org/toy", "hub id"),
        Param("temperature", float, 1.0, "sampling temperature", gt=0),
        Param("steps", int, 10, "steps", ge=1, le=100),
        Param("dtype", str, "float32", "dtype", choices=("float32", "bfloat16")),
        Param("revision", str, None, "null: default branch"),
        Param("voices", list, ("a", "b"), "voice pool"),
        Param("endpoint", str, "http://127.0.0.1", "server", runtime=True),
        Param("added", str, "x", "added later", key_at_default=False),
    )


def test_defaults_are_filled_and_copied_per_instance() -> None:
    a, b = Toy(), Toy(temperature=2)
    assert a.params["model"] == "org/toy" and a.params["voices"] == ["a", "b"]
    a.params["voices"].append("c")
    assert b.params["voices"] == ["a", "b"]
    assert b.params["temperature"] == 2  # an int is a number, kept as given
    assert Toy.runtime_params == ("endpoint",)


@pytest.mark.parametrize(
    "params,message",
    [
        ({"temprature": 1.0}, r"toy: unknown parameter\(s\) temprature; known: .*temperature"),
        ({"temperature": "hot"}, "temperature must be a number, got 'hot'"),
        ({"temperature": 0}, "temperature must be > 0, got 0"),
        ({"steps": 2.5}, "steps must be an integer, got 2.5"),
        ({"steps": True}, "steps must be an integer, got True"),
        ({"steps": 101}, "steps must be <= 100, got 101"),
        ({"dtype": "float64"}, r"dtype must be one of \['float32', 'bfloat16'\], got 'float64'"),
        ({"model": None}, "model must be a string, got null"),
        ({"voices": "a"}, "voices must be a list, got 'a'"),
    ],
)
def test_refused_values_name_the_component_and_key(params, message) -> None:
    with pytest.raises(ParamError, match=message) as info:
        Toy(**params)
    text = str(info.value)
    assert text.startswith("tts=toy: ") and "\n" not in text
    assert isinstance(info.value, ConfigError)  # the command line's exit-2 path


def test_null_is_accepted_where_the_default_is_null() -> None:
    assert Toy(revision=None).params["revision"] is None
    assert Toy(revision="main").params["revision"] == "main"


def test_key_leaves_out_runtime_and_unchanged_late_parameters() -> None:
    key = Toy(endpoint="http://elsewhere", batch_size=4).output_params()
    assert "endpoint" not in key and "batch_size" not in key and "added" not in key
    assert Toy(added="y").output_params()["added"] == "y"
    assert key == Toy().output_params()


def test_a_bad_declaration_fails_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="bad default: steps must be an integer"):

        class Bad(TTSExpert):
            name = "bad"
            parameters = (Param("steps", int, "ten", "steps"),)

    with pytest.raises(TypeError, match="declared twice"):

        class Twice(TTSExpert):
            name = "twice"
            parameters = (Param("a", int, 1), Param("a", int, 2))


def test_undeclared_components_take_any_key_as_before() -> None:
    class Loose(TTSExpert):
        name = "loose"

    assert Loose(anything=1).params == {"anything": 1}
    assert resolve_params(Loose, {"x": 2}) == {"x": 2}


# -- the command line as Hydra gets it -----------------------------------------------------------


def test_plain_parameter_overrides_of_component_groups_are_forced() -> None:
    from omnistory_core.params import force_param_overrides

    groups = ("planner", "image", "tts", "backbone", "metric", "judge")
    given = [
        "-m",
        "tts.temperature=0.5,0.7",  # a sweep over a parameter: still a sweep
        "backbone.name=noop",
        "planner.extra_body.top_k=[1,2]",
        "metric.clip.model=x",
        "tts=parler",  # a group choice
        "tts.runner.python=/venv/bin/python",  # in every node: Hydra checks it
        "planner.default_choice=false",
        "++tts.voice=x",
        "+image.size=8",
        "dataset.limit=1",  # not a component group
        "tts@alt.volume=1",  # a package override
        "--config-dir",
        "/some/dir",
    ]
    assert force_param_overrides(given, groups) == [
        "-m",
        "++tts.temperature=0.5,0.7",
        "++backbone.name=noop",
        "++planner.extra_body.top_k=[1,2]",
        "++metric.clip.model=x",
        "tts=parler",
        "tts.runner.python=/venv/bin/python",
        "planner.default_choice=false",
        "++tts.voice=x",
        "+image.size=8",
        "dataset.limit=1",
        "tts@alt.volume=1",
        "--config-dir",
        "/some/dir",
    ]


def test_a_parameter_override_is_parsed_with_its_group_and_key() -> None:
    from omnistory_core.params import parse_param_override

    groups = ("tts", "backbone")
    parsed = parse_param_override("++backbone.extra.top_k=4", groups)
    assert parsed is not None
    assert (parsed.group, parsed.key, parsed.path, parsed.value) == (
        "backbone", "extra", "extra.top_k", "4",
    )  # fmt: skip
    assert parsed.text == "backbone.extra.top_k=4" and parsed.is_parameter
    assert not parse_param_override("tts.runner.python=x", groups).is_parameter  # type: ignore[union-attr]
    assert not parse_param_override("tts.name=espeak", groups).is_parameter  # type: ignore[union-attr]
    assert parse_param_override("~tts.voice=x", groups) is None
    assert parse_param_override("dataset.limit=1", groups) is None
    assert parse_param_override("tts=parler", groups) is None
