"""Seeded noise for Piper voices: the voice's ``RandomNormalLike`` ops become graph inputs.

A Piper voice is a VITS model exported to ONNX.  It samples Gaussian noise twice per call (the
stochastic duration predictor's and the prior's), with ONNX ``RandomNormalLike`` ops.  ONNX Runtime
seeds such an op once, when the session is created, and then advances its generator on every
call, so an utterance's audio would depend on every utterance spoken before it in the process: a
resumed run would not reproduce an uninterrupted one, and two stores would disagree.

:func:`seed_noise_inputs` rewrites the graph in memory (the file is never changed): each
``RandomNormalLike(X)`` becomes ``Reshape(Slice(noise_k, 0, size(X)), shape(X))`` (with its
``mean``/``scale``/``dtype`` kept), where ``noise_k`` is a new 1-D float input.  The caller feeds
a prefix of a stream of standard normal numbers drawn from the seed (:func:`noise_stream`): the
same seed gives the same noise for every utterance, in any order and any process, and the noise is
still Gaussian, as the model was trained with.  When the buffer is shorter than the op needs, the
``Reshape`` fails and the caller retries with a longer buffer; a longer prefix of the same stream
starts with the same numbers, so the result does not depend on the first guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: the prefix of every name this module adds to a graph
PREFIX = "omnistory_noise"


@dataclass(frozen=True)
class PatchedVoice:
    """The rewritten model (serialized ONNX) and the names of its noise inputs, in graph order."""

    model: bytes
    noise_inputs: tuple[str, ...]


def seed_noise_inputs(model_bytes: bytes) -> PatchedVoice:
    """Replace every ``RandomNormalLike`` node of the model by a slice of a new noise input.

    A model without random ops is returned unchanged (``noise_inputs`` empty).  ``RandomNormal``
    (a fixed shape, no input) and the uniform ops do not occur in Piper voices and are left as
    they are; a voice that used them would stay unseeded, so :func:`unseeded_random_ops` lets the
    caller refuse it.
    """
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load_from_string(model_bytes)
    graph = model.graph
    nodes: list[Any] = []
    names: list[str] = []
    for node in graph.node:
        if node.op_type != "RandomNormalLike" or node.domain not in ("", "ai.onnx"):
            nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        k = len(names)
        name = f"{PREFIX}_{k}"
        names.append(name)
        tag = f"{PREFIX}_{k}_"
        (source,) = node.input
        (target,) = node.output
        shape, size, flat, shaped = (tag + s for s in ("shape", "size", "flat", "shaped"))
        nodes += [
            helper.make_node("Shape", [source], [shape], name=tag + "Shape"),
            helper.make_node("ReduceProd", [shape], [size], name=tag + "Size", keepdims=1),
            helper.make_node("Slice", [name, tag + "zero", size], [flat], name=tag + "Slice"),
            helper.make_node("Reshape", [flat, shape], [shaped], name=tag + "Reshape"),
        ]
        value = shaped
        scale = float(attrs.get("scale", 1.0))
        mean = float(attrs.get("mean", 0.0))
        if scale != 1.0:
            graph.initializer.append(
                helper.make_tensor(tag + "scale", TensorProto.FLOAT, [], [scale])
            )
            nodes.append(helper.make_node("Mul", [value, tag + "scale"], [tag + "scaled"]))
            value = tag + "scaled"
        if mean != 0.0:
            graph.initializer.append(
                helper.make_tensor(tag + "mean", TensorProto.FLOAT, [], [mean])
            )
            nodes.append(helper.make_node("Add", [value, tag + "mean"], [tag + "shifted"]))
            value = tag + "shifted"
        # the op's output type: its dtype attribute, else the input's (float in every Piper voice)
        dtype = int(attrs.get("dtype", TensorProto.FLOAT))
        if dtype == TensorProto.FLOAT:
            nodes.append(helper.make_node("Identity", [value], [target], name=tag + "Out"))
        else:
            nodes.append(helper.make_node("Cast", [value], [target], name=tag + "Out", to=dtype))
        graph.initializer.append(helper.make_tensor(tag + "zero", TensorProto.INT64, [1], [0]))
        graph.input.append(
            helper.make_tensor_value_info(name, TensorProto.FLOAT, [f"{name}_length"])
        )
    if not names:
        return PatchedVoice(model_bytes, ())
    del graph.node[:]
    graph.node.extend(nodes)
    return PatchedVoice(model.SerializeToString(), tuple(names))


def unseeded_random_ops(model_bytes: bytes) -> list[str]:
    """The random ops of the (patched) model that no seed controls, as ``op_type`` names."""
    import onnx

    model = onnx.load_from_string(model_bytes)
    random = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"}
    random |= {"Multinomial", "Bernoulli"}
    return sorted({n.op_type for n in model.graph.node if n.op_type in random})


def noise_stream(seed: int, sentence: int, index: int, length: int) -> Any:
    """``length`` standard normal float32 numbers for noise input ``index`` of sentence
    ``sentence``; each (seed, sentence, index) is its own stream, and a longer ``length`` gives a
    longer prefix of the same numbers."""
    import numpy as np

    rng = np.random.Generator(np.random.PCG64([int(seed) & 0xFFFFFFFF, sentence, index]))
    return rng.standard_normal(length, dtype=np.float32)


__all__ = ["PREFIX", "PatchedVoice", "noise_stream", "seed_noise_inputs", "unseeded_random_ops"]
