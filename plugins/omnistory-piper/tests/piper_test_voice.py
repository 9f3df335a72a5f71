"""A tiny Piper voice built by the tests: an ONNX graph with piper's inputs and output and one
``RandomNormalLike`` op (as real VITS voices have), plus its ``.onnx.json``.

The graph turns the phoneme ids into a waveform whose length follows ``length_scale`` (each id
lasts 48 samples times ``length_scale``), whose tone follows the ids and whose noise is
``noise_scale`` times the random op's output, so speed, text, noise and seed all reach the audio.
Nothing here imports onnx at module import: the pure tests run without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SAMPLE_RATE = 16000
SAMPLES_PER_ID = 48


def build_tiny_voice(folder: Path, *, random_ops: str = "RandomNormalLike") -> Path:
    """Write ``tiny.onnx`` and ``tiny.onnx.json`` into ``folder``; return the ONNX path."""
    import onnx
    from onnx import TensorProto, helper
    from piper.phoneme_ids import DEFAULT_PHONEME_ID_MAP

    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Cast", ["input"], ["ids"], to=f),
        helper.make_node("Unsqueeze", ["ids", "axis1"], ["ids3"]),
        helper.make_node("Gather", ["scales", "one"], ["length_scale"], axis=0),
        helper.make_node("Gather", ["scales", "zero"], ["noise_scale"], axis=0),
        helper.make_node("Mul", ["length_scale", "per_id"], ["stretch"]),
        helper.make_node("Unsqueeze", ["stretch", "axis0"], ["stretch1"]),
        helper.make_node("Concat", ["ones2", "stretch1"], ["resize_scales"], axis=0),
        helper.make_node("Resize", ["ids3", "", "resize_scales"], ["frames"], mode="nearest"),
        helper.make_node("Mul", ["frames", "step"], ["phase_step"]),
        helper.make_node("CumSum", ["phase_step", "axis2"], ["phase"]),
        helper.make_node("Sin", ["phase"], ["tone"]),
    ]
    if random_ops == "RandomNormalLike":
        # scale 0.5 and mean 0 as attributes: the rewrite must keep them
        nodes.append(helper.make_node("RandomNormalLike", ["tone"], ["noise"], scale=0.5))
    else:  # an op the rewrite does not handle: load() must refuse it
        nodes.append(helper.make_node("RandomUniformLike", ["tone"], ["noise"]))
    nodes += [
        helper.make_node("Mul", ["noise", "noise_scale"], ["scaled_noise"]),
        helper.make_node("Add", ["tone", "scaled_noise"], ["mixed"]),
        helper.make_node("Tanh", ["mixed"], ["squashed"]),
        helper.make_node("Unsqueeze", ["squashed", "axis1"], ["output"]),  # [1, 1, 1, time]
    ]
    initializers = [
        helper.make_tensor("axis0", TensorProto.INT64, [1], [0]),
        helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
        helper.make_tensor("axis2", TensorProto.INT64, [], [2]),
        helper.make_tensor("zero", TensorProto.INT64, [], [0]),
        helper.make_tensor("one", TensorProto.INT64, [], [1]),
        helper.make_tensor("per_id", f, [], [float(SAMPLES_PER_ID)]),
        helper.make_tensor("ones2", f, [2], [1.0, 1.0]),
        helper.make_tensor("step", f, [], [0.004]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_piper_voice",
        [
            helper.make_tensor_value_info("input", TensorProto.INT64, [1, "phonemes"]),
            helper.make_tensor_value_info("input_lengths", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("scales", f, [3]),
        ],
        [helper.make_tensor_value_info("output", f, [1, 1, 1, "time"])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = folder / "tiny.onnx"
    onnx.save(model, str(path))
    config = {
        "audio": {"sample_rate": SAMPLE_RATE, "quality": "x_low"},
        "espeak": {"voice": "en-us"},
        "inference": {"noise_scale": 0.667, "length_scale": 1, "noise_w": 0.8},
        "phoneme_type": "espeak",
        "phoneme_map": {},
        "phoneme_id_map": DEFAULT_PHONEME_ID_MAP,
        "num_symbols": 256,
        "num_speakers": 1,
        "speaker_id_map": {},
        "piper_version": "1.0.0",
    }
    Path(f"{path}.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    return path


def need_piper() -> None:
    for module in ("piper", "onnx", "onnxruntime"):
        pytest.importorskip(
            module,
            reason=f"{module} is not installed: pip install './plugins/omnistory-piper[voices]'",
        )


@pytest.fixture(scope="session")
def tiny_voice(tmp_path_factory) -> Path:
    need_piper()
    return build_tiny_voice(tmp_path_factory.mktemp("tiny-piper"))
