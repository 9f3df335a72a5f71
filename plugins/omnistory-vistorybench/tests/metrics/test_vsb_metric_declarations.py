"""The metric classes' declarations, and that importing them stays light."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from omnistory_vistorybench.metrics import METRICS, metric_classes

from omnistory_core.api import Metric, ParamError
from omnistory_core.kit.jobs import describe_param as describe

TRACKS = {"character", "style", "prompt", "quality", "diversity"}
#: the official metric keys, each scored by exactly one class
OFFICIAL_KEYS = {
    "cids_cross_mean",
    "cids_self_mean",
    "occm",
    "copy_paste_score",
    "self_csd",
    "cross_csd",
    "aesthetic_score",
    "inception_score",
    "scene",
    "camera",
    "character_action",
    "single_character_action",
}


def test_declarations():
    classes = metric_classes()
    assert len(classes) == len(METRICS) == 5
    criteria: list[str] = []
    for cls in classes:
        assert issubclass(cls, Metric) and cls.kind == "metric"
        assert cls.track in TRACKS and cls.scope in ("item", "group", "run")
        assert cls.version and cls.reads and cls.__doc__ and "Reads (" in cls.__doc__
        names = [row["name"] for row in describe(cls) or []]
        assert "faithful" in names and cls().params["faithful"] is True
        criteria.extend(cls.criteria)
    assert sorted(criteria) == sorted(OFFICIAL_KEYS)
    scopes = {cls.name: cls.scope for cls in classes}
    assert scopes == {
        "cids": "group",
        "csd": "group",
        "aesthetic": "group",
        "diversity": "run",
        "prompt_align": "item",
    }


def test_unknown_parameters_are_refused():
    for cls in metric_classes():
        with pytest.raises(ParamError):
            cls(no_such_parameter=1)


def test_runtime_parameters_stay_out_of_the_cache_key():
    for cls in metric_classes():
        key = cls().output_params()
        assert "device" not in key and "batch_size" not in key
        assert key["faithful"] is True


def test_import_is_light():
    code = (
        "import sys, json\n"
        "import omnistory_vistorybench.metrics as m\n"
        "m.metric_classes()\n"
        "import omnistory_vistorybench.metrics.math\n"
        "heavy = ('torch', 'transformers', 'torchvision', 'openai', 'scipy', 'PIL')\n"
        "print(json.dumps(sorted(k for k in heavy if k in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
