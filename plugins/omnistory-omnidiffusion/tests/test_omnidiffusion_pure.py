"""Parameters, prompts, answer parsing and token handling of backbone=omnidiffusion (no model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from omnistory_omnidiffusion import prompts
from omnistory_omnidiffusion.backbone import OmniDiffusion
from omnistory_omnidiffusion.prompts import Story
from omnistory_omnidiffusion.settings import DEFAULTS, check_settings
from omnistory_testkit import demo_examples

from omnistory_core.api import ConfigError

CONF = (
    Path(__file__).parents[1]
    / "src"
    / "omnistory_omnidiffusion"
    / "conf"
    / "backbone"
    / "omnidiffusion.yaml"
)


def demo_story(index: int = 0) -> Story:
    example = demo_examples(index + 1)[index]
    return Story(example.current.text, example.metadata, example.conditions)


# -- parameters ------------------------------------------------------------------------------
def test_plugin_import_stays_light():
    code = (
        "import sys, omnistory_omnidiffusion.plugin, omnistory_omnidiffusion.backbone;"
        "print(sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_defaults_are_the_official_runner_settings():
    s = check_settings({})
    assert (s["model"], s["image_tokenizer"], s["audio_decoder"]) == (
        "lijiang/Omni-Diffusion",
        "showlab/magvitv2",
        "THUDM/glm-4-voice-decoder",
    )
    assert (s["fallbacks"], s["load_seed"], s["input_resolution"]) == ("official", 42, 512)
    assert (s["temperature"], s["top_p"], s["image_cfg"]) == (0.0, 0.9, 0.0)
    assert [s[k] for k in ("plan_max_tokens", "plan_steps", "plan_alg", "plan_repeat_penalty")] == [
        192,
        192,
        "entropy",
        1.05,
    ]
    assert (s["recovery_max_tokens"], s["recovery_steps"]) == (80, 80)
    assert [
        s[k]
        for k in (
            "image_max_tokens",
            "image_steps",
            "image_alg",
            "image_repeat_penalty",
            "image_position_penalty",
        )
    ] == [260, 260, "entropy-penalty", 1.2, 2.0]
    assert [
        s[k] for k in ("speech_max_tokens", "speech_steps", "speech_alg", "speech_repeat_penalty")
    ] == [64, 32, "entropy", 1.0]
    assert s["flow_steps"] == 10 and s["dtype"] == "auto"


def test_the_shipped_yaml_holds_only_the_environment_variables(monkeypatch):
    from omegaconf import OmegaConf

    for var in (
        "OMNISTORY_SOURCE_BACKBONE_OMNIDIFFUSION",
        "OMNISTORY_MODEL_BACKBONE_OMNIDIFFUSION",
        "OMNISTORY_MODEL_BACKBONE_OMNIDIFFUSION_MAGVIT",
        "OMNISTORY_MODEL_BACKBONE_OMNIDIFFUSION_DECODER",
    ):
        monkeypatch.delenv(var, raising=False)
    conf = OmegaConf.to_container(OmegaConf.create(yaml.safe_load(CONF.read_text())), resolve=True)
    assert conf.pop("name") == "omnidiffusion"
    assert set(conf) == {"source_dir", "model", "image_tokenizer", "audio_decoder"}
    assert conf == {k: DEFAULTS[k] for k in conf}  # unset, they give the declared defaults
    monkeypatch.setenv("OMNISTORY_MODEL_BACKBONE_OMNIDIFFUSION", "/models/omni")
    monkeypatch.setenv("OMNISTORY_MODEL_BACKBONE_OMNIDIFFUSION_DECODER", "/models/decoder")
    conf = OmegaConf.to_container(OmegaConf.create(yaml.safe_load(CONF.read_text())), resolve=True)
    assert (conf["model"], conf["audio_decoder"]) == ("/models/omni", "/models/decoder")


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"steps": 128}, "steps"),  # not a key: each pass has its own
        ({"fallbacks": "placeholder"}, "fallbacks"),
        ({"plan_alg": "greedy"}, "plan_alg"),
        ({"image_steps": 0}, "image_steps"),
        ({"speech_max_tokens": "many"}, "speech_max_tokens"),
        ({"top_p": 1.5}, "top_p"),
        ({"temperature": -1}, "temperature"),
        ({"image_repeat_penalty": 0}, "image_repeat_penalty"),
        ({"load_seed": "42"}, "load_seed"),
        ({"dtype": "int8"}, "dtype"),
        ({"model": ""}, "model"),
        ({"audio_decoder_revision": 3}, "audio_decoder_revision"),
    ],
)
def test_bad_parameters_are_config_errors_naming_the_parameter(params, named, source_tree):
    with pytest.raises(ConfigError, match=named) as info:
        OmniDiffusion(source_dir=str(source_tree), seed=0, **params)
    message = str(info.value)
    assert message.startswith("backbone=omnidiffusion") and "\n" not in message
    if named == "steps":
        assert "known:" in message and "plan_steps" in message


def test_source_dir_is_required_and_explained(source_tree, tmp_path):
    with pytest.raises(ConfigError, match="backbone.source_dir is not set") as info:
        OmniDiffusion(seed=0)
    assert "git clone https://github.com/VITA-MLLM/Omni-Diffusion.git" in str(info.value)
    assert "submodule update --init --recursive" in str(info.value)
    with pytest.raises(ConfigError, match="is not a directory"):
        OmniDiffusion(source_dir=str(tmp_path / "nowhere"), seed=0)
    # a checkout whose GLM-4-Voice submodule was never initialised
    bare = tmp_path / "bare"
    for name in (
        "omni_diffusion/data/processor/image_processor.py",
        "omni_diffusion/models/magvit/modeling_magvitv2.py",
    ):
        (bare / name).parent.mkdir(parents=True, exist_ok=True)
        (bare / name).write_text((source_tree / name).read_text())
    (bare / "third_party" / "GLM-4-Voice").mkdir(parents=True)
    with pytest.raises(ConfigError, match="submodule is not checked out") as info:
        OmniDiffusion(source_dir=str(bare), seed=0)
    assert f"git -C {bare.resolve()} submodule update --init --recursive" in str(info.value)


def test_cache_key_holds_the_code_and_settings_not_the_paths(source_tree, tmp_path):
    import shutil

    params = OmniDiffusion(
        source_dir=str(source_tree),
        seed=3,
        device="cuda:1",
        attn_implementation="sdpa",
        batch_size=1,
    ).output_params()
    for runtime in ("device", "source_dir", "attn_implementation", "batch_size"):
        assert runtime not in params
    assert "seed" not in params  # load_seed fixes the seed: the run's seed changes nothing
    assert params["load_seed"] == 42 and len(params["source_tree"]) == 64
    assert params["fallbacks"] == "official" and params["plan_steps"] == 192
    own = OmniDiffusion(source_dir=str(source_tree), seed=3, load_seed=None).output_params()
    assert own["seed"] == 3
    copy = shutil.copytree(source_tree, tmp_path / "copy")
    assert (
        OmniDiffusion(source_dir=str(copy), seed=0).output_params()
        == OmniDiffusion(source_dir=str(source_tree), seed=0).output_params()
    )
    (copy / "third_party/GLM-4-Voice/flow_inference.py").write_text("# changed\n")
    assert (
        OmniDiffusion(source_dir=str(copy), seed=0).output_params()["source_tree"]
        != params["source_tree"]
    )


def test_prefetch_lists_the_three_checkpoints():
    assert OmniDiffusion.checkpoints({}) == [
        "lijiang/Omni-Diffusion",
        "showlab/magvitv2",
        "THUDM/glm-4-voice-decoder",
    ]
    assert OmniDiffusion.checkpoints({"model": "/m"})[0] == "/m"


# -- prompts ---------------------------------------------------------------------------------
def test_planning_prompt_carries_the_story_inputs_and_the_answer_format():
    story = demo_story()
    text = prompts.planning_prompt(story)
    assert f"\n{story.current_text}\n" in text
    metadata = json.loads(story.metadata_json())
    assert list(metadata) == ["metadata"]
    assert list(metadata["metadata"]) == [
        "genre",
        "topic",
        "style",
        "narrative_tense",
        "narrative_perspective",
        "characters",
    ]
    assert story.metadata_json() in text
    condition = json.loads(story.condition_json())
    assert list(condition) == ["characters", "scene", "text content", "ambient_sound"]
    assert condition["text content"] == story.conditions["text_instruction"]
    assert story.condition_json() in text
    lines = [
        line.split(":")[0] for line in text.splitlines() if line.split(":")[0] in prompts.LABELS
    ]
    assert lines == ["NARRATION", "SPEAKER", "SPEECH", "IMAGE_PROMPT"]
    # the current page's image tokens follow on their own line
    message = prompts.with_image(text, [5, 7])
    assert message.endswith(":\n<|begin_of_image|><|image_5|><|image_7|><|end_of_image|>")


def test_recovery_prompt_asks_for_the_spoken_line_and_shows_the_planned_narration():
    story = demo_story()
    text = prompts.recovery_prompt(story, "Pip taps the glass.")
    assert "Pip taps the glass." in text and story.condition_json() in text
    assert text.rstrip().endswith("SPEECH: <one short line said aloud>")
    assert "SPEAKER:" in text and "IMAGE_PROMPT" not in text and "NARRATION" not in text
    without = prompts.recovery_prompt(story, "")
    assert "Planned text of the next page" not in without
    assert "Planned text of the next page" in text


def test_image_description_assembles_plan_and_story():
    story = demo_story()
    text = prompts.image_description(story, "A fox at a window.", "Pip taps the glass.")
    assert text.startswith(
        "An illustration for a children's picture book. A fox at a window. "
        "Narration: Pip taps the glass. Scene: Lena's dark bedroom"
    )
    assert (
        "Characters: Pip, urgent, taps on the window glass with his paw; Lena, surprised, "
        "turns toward the window Style: flat shapes, night colours Topic: "
    ) in text
    assert text.endswith("Do not draw any text, captions or speech bubbles.")
    assert "Narration:" not in prompts.image_description(story, "x", "")
    # the official fallback: a prompt built from the same pieces, nested into the final one
    synthesized = prompts.image_description(story, "", "Pip taps the glass.")
    final = prompts.image_description(story, synthesized, "Pip taps the glass.")
    assert final.count("Scene: ") == 2 and final.count("An illustration") == 2


def test_character_notes_skip_empty_parts():
    notes = prompts.character_notes(
        {
            "characters": [
                {"name": "Pip", "emotion": "", "action": " runs "},
                {"name": ""},
                "not a dict",
            ]
        }
    )
    assert notes == ["Pip, runs"]


def test_task_messages_use_the_trained_instructions_and_chatml():
    assert prompts.t2i_message("a fox") == (
        "Generate an image based on the provided text description.\na fox"
    )
    assert prompts.tts_message("Come quick!") == "Convert the text to speech.\nCome quick!"
    assert prompts.chat("hi") == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


# -- answers ---------------------------------------------------------------------------------
def test_parse_answer_reads_the_four_lines():
    answer = (
        'NARRATION: Pip taps the glass.\nSPEAKER: Pip\nSPEECH: "Come quick!"\n'
        "IMAGE_PROMPT: A fox at a window."
    )
    assert prompts.parse_answer(answer) == {
        "narration": "Pip taps the glass.",
        "speaker": "Pip",
        "speech": "Come quick!",
        "image_prompt": "A fox at a window.",
    }


@pytest.mark.parametrize(
    ("answer", "field", "value"),
    [
        ("Sure!\n  narration : The moon fell.\nSpeech: Hi", "narration", "The moon fell."),
        ("NARRATION: The moon\nfell   down.\nSPEAKER: Pip", "narration", "The moon fell down."),
        ("NARRATION:\nOn the next line.\n\nSPEECH: x", "narration", "On the next line."),
        (
            "NARRATION: First. Note: inline colons stay.",
            "narration",
            "First. Note: inline colons stay.",
        ),
        ("NARRATION: First.\nNote: a new label ends it.", "narration", "First."),
        ("SPEECH: 'Hurry!'", "speech", "Hurry!"),
        ("NARRATION: only", "speech", ""),
        ("SPEECH:", "speech", ""),
        ("SPEECH: first\nSPEECH: second", "speech", "first"),
        ("", "narration", ""),
    ],
)
def test_labelled_fields(answer, field, value):
    assert prompts.parse_answer(answer)[field] == value


def test_clean():
    assert prompts.clean(None) == "" and prompts.clean('  "a  b\n c" ') == "a b c"


# -- generated tokens ------------------------------------------------------------------------
def test_split_generated_by_vocabulary_range():
    out = prompts.split_generated([1, 100, 101, 163, 164, 200, 2], audio_0=100, image_0=164)
    assert out.text_ids == [1, 2]
    assert out.audio_codes == [0, 1, 63]
    assert out.image_codes == [0, 36]


def test_image_grid_pads_cuts_and_clamps():
    assert prompts.image_grid([]) is None
    assert prompts.image_grid([3, 9]) == [3, 9] + [9] * 254
    assert prompts.image_grid(list(range(300))) == list(range(256))
    assert prompts.image_grid([-1, 9000]) == [0] + [8191] * 255


def test_env_create_installs_the_official_pins(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "omnistory_core",
            "env",
            "create",
            "backbone=omnidiffusion",
            "--dry-run",
            "--dir",
            str(tmp_path / "venv"),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    install = next(line for line in out.splitlines() if "transformers==" in line)
    for pin in (
        "transformers==4.51.3",
        "accelerate>=1.1.1",
        "torch==2.6.0",
        "torchaudio==2.6.0",
        "funasr",
        "HyperPyYAML",
        "deepspeed",
    ):
        assert f" {pin}" in install
    assert "omnistory-omnidiffusion" in out
