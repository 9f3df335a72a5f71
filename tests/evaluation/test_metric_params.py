"""The built-in metrics declare their parameters; their cache-key parameters did not change.

The expected ``output_params`` were computed before the declarations (``setdefault`` in
``__init__``), with the shipped yaml and the engine's ``seed=0``: same key, same stored scores."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omnistory_eval.metrics.bertscore import BERTScoreMetric
from omnistory_eval.metrics.clip import CLIPMetric
from omnistory_eval.metrics.speech_meta import SpeechMetaMetric

from omnistory_core.params import ParamError, config_node

EVAL_CONF = Path(__file__).resolve().parents[2] / "plugins/omnistory-eval/src/omnistory_eval/conf"
CONF = EVAL_CONF / "metric"
EXPECTED = {
    CLIPMetric: {"model": "openai/clip-vit-base-patch32", "seed": 0},
    BERTScoreMetric: {
        "idf": False,
        "lang": "en",
        "model_type": None,
        "num_layers": None,
        "rescale_with_baseline": False,
        "restore_prefix_space": False,
        "seed": 0,
        "use_fast_tokenizer": False,
    },
    SpeechMetaMetric: {
        "asr_input": "path",  # added later: Whisper is given the file path, as in the paper
        "asr_num_beams": None,
        "emotion_models": {
            "speechbrain": "speechbrain/emotion-recognition-wav2vec2-IEMOCAP",
            "hubert": "superb/hubert-large-superb-er",
            "emotion2vec": "iic/emotion2vec_plus_large",
        },
        "gender_model": "audeering/wav2vec2-large-robust-24-ft-age-gender",
        "language": None,
        "seed": 0,
        "speechbrain_log_scores": "auto",
        "thresholds": {
            "pitch_female_low_normal": 165.0,
            "pitch_female_normal_high": 255.0,
            "pitch_male_low_normal": 110.0,
            "pitch_male_normal_high": 170.0,
            "pitch_unknown_low_normal": 145.0,
            "pitch_unknown_normal_high": 220.0,
            "speed_normal_fast": 4.7,
            "speed_slow_normal": 2.6,
        },
        "whisper_model": "openai/whisper-large-v3",
    },
}


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda c: c.name)
def test_declared_metric_keeps_its_key_and_matches_its_yaml(cls):
    assert cls.parameters is not None
    conf = yaml.safe_load((CONF / f"{cls.name}.yaml").read_text())
    assert conf.pop("name") == cls.name
    for params in (conf, {}):
        out = cls(**params, seed=0).output_params()
        # every key parameter of before, with its value; a parameter declared since then (new
        # behaviour, its own decision about the key) may add to them, nothing may go
        assert {k: out.get(k, "<absent>") for k in EXPECTED[cls]} == EXPECTED[cls]
        added = set(out) - set(EXPECTED[cls])
        assert added <= {p.name for p in cls.parameters}, added
    # the yaml and the declaration agree on every value (the yaml documents the paper's call)
    node = config_node(cls)
    assert {k: v for k, v in conf.items() if k != "batch_size"} == {
        k: v for k, v in node.items() if k in conf
    }
    assert conf.get("batch_size", cls.default_batch_size) == cls.default_batch_size


def test_a_bad_metric_setting_is_refused_when_built_naming_the_key():
    with pytest.raises(ParamError, match="metric=speech_meta: speechbrain_log_scores must be one"):
        SpeechMetaMetric(speechbrain_log_scores="always")
    with pytest.raises(ParamError, match="metric=clip: unknown parameter.*modle"):
        CLIPMetric(modle="x")
    with pytest.raises(ParamError, match="metric=bertscore: num_layers must be an integer"):
        BERTScoreMetric(num_layers="17")
