"""Tiny weights and stand-in checkouts for every open-weight method, for the suite test.

Each plugin's own test builders (in ``plugins/<name>/tests``) make them; this module puts those
folders on ``sys.path`` and returns the environment variables the presets read.
"""

from __future__ import annotations

import sys
from pathlib import Path

PLUGINS = Path(__file__).resolve().parents[2]
BUILDERS = (
    "omnistory-qwen-edit",
    "omnistory-storydiffusion",
    "omnistory-omnigen2",
    "omnistory-uno",
    "omnistory-characonsist",
    "omnistory-storyadapter",
)


def build_all(root: Path) -> dict[str, str]:
    """Build everything under ``root``; the environment that points the presets at it."""
    for name in BUILDERS:
        folder = str(PLUGINS / name / "tests")
        if folder not in sys.path:
            sys.path.append(folder)
    import characonsist_standin
    import omnigen2_standin
    import qwen_tiny
    import sdxl_tiny
    import storyadapter_standin
    import uno_standin

    qwen = qwen_tiny.build_tiny_qwen_edit(root / "qwen")
    lora = qwen_tiny.build_tiny_lora(root / "lora", qwen)
    sdxl = sdxl_tiny.build_tiny_sdxl(root / "sdxl")
    omnigen2 = omnigen2_standin.build_source_tree(root / "OmniGen2")
    uno = uno_standin.build_source_tree(root / "UNO")
    uno_weights = uno_standin.build_weights(root / "uno-weights")
    characonsist = characonsist_standin.build_source_tree(root / "CharaConsist")
    adapter = storyadapter_standin.build_ip_adapter(root / "ip-adapter")
    env = {
        "OMNISTORY_MODEL_IMAGE_QWEN_EDIT": qwen,
        "OMNISTORY_LORA_IMAGE_QWEN_EDIT_NEXT_SCENE": lora,
        "OMNISTORY_MODEL_IMAGE_STORYDIFFUSION": sdxl,
        "OMNISTORY_SOURCE_IMAGE_OMNIGEN2": omnigen2,
        "OMNISTORY_MODEL_IMAGE_OMNIGEN2": omnigen2_standin.build_checkpoint(
            root / "omnigen2-weights", omnigen2
        ),
        "OMNISTORY_SOURCE_IMAGE_UNO": uno,
        "OMNISTORY_SOURCE_IMAGE_CHARACONSIST": characonsist,
        "OMNISTORY_MODEL_IMAGE_CHARACONSIST": characonsist_standin.build_checkpoint(root / "flux"),
        "OMNISTORY_SOURCE_IMAGE_STORYADAPTER": storyadapter_standin.build_source_tree(
            root / "story-adapter"
        ),
        "OMNISTORY_MODEL_IMAGE_STORYADAPTER": sdxl,
        "OMNISTORY_MODEL_IMAGE_STORYADAPTER_ENCODER": adapter["image_encoder"],
        "OMNISTORY_MODEL_IMAGE_STORYADAPTER_IP_CKPT": adapter["ip_ckpt"],
    }
    for key, variable in (
        ("flux_dev", "FLUX_DEV"),
        ("ae", "AE"),
        ("lora", "LORA"),
        ("t5", "T5"),
        ("clip", "CLIP"),
    ):
        env[f"OMNISTORY_MODEL_IMAGE_UNO_{variable}"] = uno_weights[key]
    return {key: str(value) for key, value in env.items()}
