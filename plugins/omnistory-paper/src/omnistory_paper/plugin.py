"""Registers the paper's presets on the config search path; it adds no component of its own."""

from omnistory_core.api import hookimpl

#: the paper's 18 orchestration systems (Section 5.1): planner x image expert x TTS expert
ORCHESTRATION: tuple[str, ...] = tuple(
    [
        f"{p}_{i}_{t}"
        for p in ("gpt", "claude", "glm")
        for i in ("dev", "kontext")
        for t in ("parler", "voxcpm")
    ]
    + [f"internvl_{i}_parler" for i in ("dev", "kontext", "nitro")]
    + [f"qwen35_{i}_voxcpm" for i in ("dev", "kontext", "nitro")]
)

#: the paper's 10 semi-orchestration systems (Section 5.1): a backbone that makes text and one other
#: modality natively, plus an expert for the third; T+I backbones (MMaDA, Emu3) x TTS expert, T+S
#: backbones (Qwen2.5-Omni, EMOVA) x image expert
SEMI: tuple[str, ...] = tuple(
    [f"{b}_{t}" for b in ("mmada", "emu3") for t in ("parler", "voxcpm")]
    + [f"{b}_{i}" for b in ("qwen25omni", "emova") for i in ("dev", "kontext", "nitro")]
)

#: the paper's 4 any-to-any systems (Section 5.1): one backbone makes all three modalities
ANY_TO_ANY: tuple[str, ...] = ("hyperclova", "anygpt", "omnidiffusion", "dynin")

#: the 32 configurations of the paper, each exactly once (``suite=paper32``)
PAPER32: tuple[str, ...] = ORCHESTRATION + SEMI + ANY_TO_ANY


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_paper.conf")
