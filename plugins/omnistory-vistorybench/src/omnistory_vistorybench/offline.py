"""Offline weights for the ViStoryBench metrics: tiny random checkpoints saved the way the real
ones are, and the parameters that point each metric at them.

The metrics load official files (the CSD ``.pth``, SigLIP + the aesthetic head, Inception v3's
ImageNet state dict, GroundingDINO and CLIP checkpoints, the judges' rubric folder) that no test
may download.  :func:`offline_metric_params` builds what a metric needs under one folder and
returns its parameters (``evaluate --set metric.NAME.KEY=VALUE``, a sweep's
``evaluation.overrides``, ``check_component(Cls, **params)``), so a plugin's tests score through
every metric's own loading code, scores being meaningless but deterministic::

    from omnistory_testkit import FakeServer, check_component
    from omnistory_vistorybench.metrics.csd import CSDMetric
    from omnistory_vistorybench.offline import offline_metric_params

    params = offline_metric_params(tmp_path, ["csd"])["csd"]
    check_component(CSDMetric, **params)

The judge-based criteria (prompt alignment, CIDS's ``single_character_action``) ask an
OpenAI-compatible endpoint: pass ``judge_url`` (a local server answering :data:`JUDGE_ANSWER`).

Everything heavy (torch, transformers) is imported when a builder runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: CSD's network at toy size (its architecture parameters; the official is ViT-L/14)
CSD_TINY: dict[str, int] = dict(
    image_size=32, patch_size=8, width=32, layers=2, heads=2, embed_dim=16
)
#: what a stand-in judge answers every rubric (the official parsers read ``Score: N``)
JUDGE_ANSWER = "Analysis: a stand-in judge.\nScore: 3"
METRICS: tuple[str, ...] = ("cids", "csd", "aesthetic", "diversity", "prompt_align")
#: the words of the tiny GroundingDINO tokenizer (anything else is [UNK])
_DINO_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "character", "person", "."]


def _seeded(seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    return torch


def build_csd(path: Path, seed: int = 0) -> Path:
    """A CSD state dict of :data:`CSD_TINY`'s size, saved as the official ``.pth``."""
    from omnistory_vistorybench.metrics._csd_net import CSDStyleNet

    torch = _seeded(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(CSDStyleNet(**CSD_TINY).state_dict(), path)
    return path


def build_siglip(directory: Path, seed: int = 0) -> Path:
    """A SiglipModel (vision: hidden 32, 2 layers, so400m's 27x27 grid of 14 px patches) and its
    image processor, saved like google/siglip-so400m-patch14-384."""
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel

    _seeded(seed)
    text = dict(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=16,
    )
    vision = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=378,
        patch_size=14,
    )
    SiglipModel(SiglipConfig(text_config=text, vision_config=vision)).save_pretrained(directory)
    SiglipImageProcessor(size={"height": 384, "width": 384}).save_pretrained(directory)
    return directory


def build_aesthetic_head(path: Path, hidden_size: int = 32, seed: int = 1) -> Path:
    """The aesthetic predictor's head for a ``hidden_size`` encoder, saved as the official file."""
    from omnistory_vistorybench.metrics.aesthetic import build_head

    torch = _seeded(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(build_head(hidden_size).state_dict(), path)
    return path


def build_inception(path: Path, seed: int = 0) -> Path:
    """Inception v3 at its real size with variance-keeping random weights (so that the class
    probabilities depend on the image), saved as torchvision's ImageNet state dict."""
    from omnistory_vistorybench.metrics._inception_net import build_inception_v3

    torch = _seeded(seed)
    net = build_inception_v3()
    for module in net.modules():
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
        elif isinstance(module, torch.nn.Linear):
            torch.nn.init.normal_(module.weight, std=0.05)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(net.state_dict(), path)
    return path


def build_clip(directory: Path, seed: int = 0, image_size: int = 32) -> Path:
    """A CLIPModel (vision: hidden 32, 2 layers) and its image processor, saved like
    openai/clip-vit-large-patch14 (CIDS's encoder reads the vision tower)."""
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

    _seeded(seed)
    text = dict(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        max_position_embeddings=16,
    )
    vision = dict(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=image_size,
        patch_size=8,
    )
    config = CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)
    CLIPModel(config).save_pretrained(directory)
    CLIPImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    ).save_pretrained(directory)
    return directory


def build_grounding_dino(directory: Path, seed: int = 0) -> Path:
    """A GroundingDinoForObjectDetection (Swin 8-dim, BERT 32-dim, 12 queries, ~0.16M
    parameters) and its processor (a BERT tokenizer over :data:`_DINO_VOCAB`; images resized to
    128-192 px so that the extra feature level stays above 1x1), saved like
    IDEA-Research/grounding-dino-tiny."""
    from transformers import (
        BertTokenizer,
        GroundingDinoConfig,
        GroundingDinoForObjectDetection,
        GroundingDinoProcessor,
    )

    try:
        from transformers import GroundingDinoImageProcessor as ImageProcessor
    except ImportError:  # pragma: no cover - transformers 5's PIL backend without torchvision
        from transformers import GroundingDinoImageProcessorPil as ImageProcessor

    directory.mkdir(parents=True, exist_ok=True)
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(_DINO_VOCAB) + "\n", encoding="utf-8")
    backbone = dict(
        model_type="swin",
        embed_dim=8,
        depths=[1, 1, 1, 1],
        num_heads=[1, 1, 1, 1],
        window_size=4,
        image_size=32,
        out_indices=[2, 3, 4],
    )
    text = dict(
        model_type="bert",
        vocab_size=len(_DINO_VOCAB),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    config = GroundingDinoConfig(
        backbone_config=backbone,
        text_config=text,
        # GroupNorm(32, d_model) needs d_model % 32 == 0; two decoder layers for the tied heads
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=12,
        encoder_n_points=1,
        decoder_n_points=1,
        max_text_len=16,
    )
    _seeded(seed)
    GroundingDinoForObjectDetection(config).save_pretrained(directory)
    processor = GroundingDinoProcessor(
        image_processor=ImageProcessor(size={"shortest_edge": 128, "longest_edge": 192}),
        tokenizer=BertTokenizer(str(vocab)),
    )
    processor.save_pretrained(directory)
    return directory


def write_rubrics(directory: Path) -> Path:
    """A rubric folder with the official file names (stand-in texts): what prompt alignment and
    CIDS's single-character judge send, and their pre-flight looks for."""
    from omnistory_vistorybench.metrics.alignment_judge import RUBRIC_FILES, SINGLE_CHARACTER_RUBRIC

    directory.mkdir(parents=True, exist_ok=True)
    for dimension, name in RUBRIC_FILES.items():
        (directory / name).write_text(f"STAND-IN {dimension} rubric.", encoding="utf-8")
    (directory / SINGLE_CHARACTER_RUBRIC).write_text("STAND-IN single rubric.", encoding="utf-8")
    return directory


def offline_metric_params(
    root: Path, metrics: Iterable[str] = METRICS, *, judge_url: str | None = None
) -> dict[str, dict[str, Any]]:
    """Per metric of ``metrics``, the parameters that make it score offline from tiny weights
    built under ``root`` (each built once; a second call reuses them), on the CPU.

    ``cids`` embeds every character with the tiny CLIP (``face_encoder=clip``: the face models'
    weight files are their own tests'), detects with the tiny GroundingDINO, and asks
    ``judge_url`` for ``single_character_action`` when given; ``prompt_align`` asks ``judge_url``
    (without one it has no endpoint: it needs a server)."""
    root = Path(root)
    wanted = list(metrics)
    unknown = sorted(set(wanted) - set(METRICS))
    if unknown:
        raise ValueError(f"no offline weights for {unknown}; metrics: {', '.join(METRICS)}")

    def once(path: Path, build: Any) -> str:
        if not path.exists():
            build(path)
        return str(path)

    out: dict[str, dict[str, Any]] = {}
    judge = {"max_retries": 0} if judge_url is None else {"base_url": judge_url, "max_retries": 0}
    for name in wanted:
        if name == "csd":
            csd = once(root / "csd_vit-tiny.pth", build_csd)
            out[name] = {"checkpoint": csd, "device": "cpu", **CSD_TINY}
        elif name == "aesthetic":
            encoder = once(root / "siglip", build_siglip)
            head = once(root / "aesthetic_predictor_v2_5.pth", build_aesthetic_head)
            out[name] = {"encoder": encoder, "head": head, "device": "cpu"}
        elif name == "diversity":
            net = once(root / "inception_v3_google-0cc3c7bd.pth", build_inception)
            out[name] = {"checkpoint": net, "backend": "builtin", "device": "cpu"}
        elif name == "prompt_align":
            rubrics = once(root / "user_prompts", write_rubrics)
            out[name] = {"rubric_dir": rubrics, **judge}
        elif name == "cids":
            params = {
                "detector_checkpoint": once(root / "grounding_dino", build_grounding_dino),
                "clip_model": once(root / "clip", build_clip),
                "face_encoder": "clip",
                "device": "cpu",
            }
            if judge_url is not None:
                params.update(
                    judge_base_url=judge_url,
                    rubric_dir=once(root / "user_prompts", write_rubrics),
                    judge_max_retries=0,
                )
            out[name] = params
    return out


__all__ = [
    "CSD_TINY",
    "JUDGE_ANSWER",
    "METRICS",
    "build_aesthetic_head",
    "build_clip",
    "build_csd",
    "build_grounding_dino",
    "build_inception",
    "build_siglip",
    "offline_metric_params",
    "write_rubrics",
]
