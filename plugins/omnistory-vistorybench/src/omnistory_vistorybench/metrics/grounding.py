"""The ``groundingdino`` detector of CIDS: transformers' port of GroundingDINO.

The official evaluator (``bench/content/cids_evaluator.py``) runs ``groundingdino-py`` 0.4.0
with the SwinT-OGC checkpoint (``groundingdino_swint_ogc.pth``, BERT ``bert-base-uncased``)
and calls ``groundingdino.util.inference.predict(model, image, "character", box_threshold=0.25,
text_threshold=0.25)``.  That package's BERT wrapper does not run on transformers 5.x (it uses
``get_head_mask`` and the old attention-mask signature; IDEA-Research/GroundingDINO#446, #458),
and this project's metrics extra pins transformers 5.  So this detector runs
``GroundingDinoForObjectDetection`` + ``AutoProcessor`` from transformers on an HF-format
checkpoint directory or hub id (``IDEA-Research/grounding-dino-tiny`` is the SwinT-OGC weights
converted by transformers; ``-base`` the SwinB ones).  It is the same model in another
implementation, a documented departure (:data:`omnistory_vistorybench.fidelity.DEPARTURES`):
boxes can differ from the official ones in the last float digits, so a box whose score sits at
the threshold may flip.

What is kept from the official ``predict``:

* the caption is lower-cased, stripped and ends with ``"."`` (``preprocess_caption``);
* the image is resized with its shortest edge to 800 px, at most 1333 px long, and normalised
  with the ImageNet mean/std (the HF processor's defaults, the official ``load_image``);
* per query, ``sigmoid(logits)`` is maxed over the text tokens; queries above
  ``box_threshold`` are kept, with their normalised ``(cx, cy, w, h)`` boxes;
* ``text_threshold`` only chooses each box's phrase in the official code and CIDS never reads
  phrases, so it changes no box here (it is accepted and recorded).

Boxes come back sorted by decreasing score (CIDS sorts them again: ties stay in query order).
No heavy import at module level.
"""

from __future__ import annotations

from typing import Any

from omnistory_vistorybench.metrics._common import load_pretrained, release_torch_memory
from omnistory_vistorybench.metrics.clip_encoder import Detection

#: the transformers conversion of the official SwinT-OGC checkpoint
OFFICIAL_GROUNDING_DINO = "IDEA-Research/grounding-dino-tiny"
BOX_THRESHOLD = 0.25
TEXT_THRESHOLD = 0.25


def preprocess_caption(caption: str) -> str:
    """The caption as the official ``predict`` feeds it: lower case, stripped, ending in ``.``."""
    result = caption.lower().strip()
    return result if result.endswith(".") else result + "."


def select_boxes(logits: Any, boxes: Any, box_threshold: float) -> Detection:
    """The official ``predict`` filter on one image's raw outputs.

    ``logits`` is ``(queries, text_len)`` (masked text positions at ``-inf``), ``boxes`` is
    ``(queries, 4)`` normalised ``cx, cy, w, h``.  A query is kept when its best token
    probability is above ``box_threshold``; the result is sorted by decreasing probability.
    """
    import torch

    probs = torch.sigmoid(logits.float()).max(dim=-1).values
    keep = probs > box_threshold
    scores = probs[keep]
    kept = boxes.float()[keep]
    # stable, so that equal scores stay in query order whatever the backend's sort does
    order = torch.sort(scores, descending=True, stable=True).indices
    return Detection(
        [tuple(float(v) for v in row) for row in kept[order].tolist()],
        [float(s) for s in scores[order].tolist()],
    )


class GroundingDinoDetector:
    """``load(checkpoint)``, then ``detect(image, prompt) -> Detection`` (the Detector protocol)."""

    def __init__(
        self,
        *,
        device: str = "cpu",
        box_threshold: float = BOX_THRESHOLD,
        text_threshold: float = TEXT_THRESHOLD,
    ):
        self.device = device
        self.box_threshold = float(box_threshold)
        self.text_threshold = float(text_threshold)
        self.model: Any = None
        self.processor: Any = None

    def load(self, checkpoint: str = OFFICIAL_GROUNDING_DINO) -> GroundingDinoDetector:
        from transformers import AutoProcessor, GroundingDinoForObjectDetection

        self.processor = load_pretrained(
            checkpoint, lambda: AutoProcessor.from_pretrained(checkpoint)
        )
        model = load_pretrained(
            checkpoint, lambda: GroundingDinoForObjectDetection.from_pretrained(checkpoint)
        )
        # the official runs the detector in float32 on every device
        self.model = model.eval().to(self.device)  # pyright: ignore[reportArgumentType]
        return self

    def unload(self) -> None:
        self.model = self.processor = None
        release_torch_memory()

    def raw(self, image: Any, prompt: str) -> tuple[Any, Any]:
        """The model's ``(logits, pred_boxes)`` for one RGB PIL image, on the CPU."""
        import torch

        if self.model is None:
            raise RuntimeError("GroundingDinoDetector.detect before load()")
        rgb = image if image.mode == "RGB" else image.convert("RGB")
        inputs = self.processor(images=rgb, text=preprocess_caption(prompt), return_tensors="pt")
        inputs = {k: v.to(self.device) for k, v in inputs.items()}
        with torch.no_grad():
            out = self.model(**inputs)
        return out.logits[0].cpu(), out.pred_boxes[0].cpu()

    def detect(self, image: Any, prompt: str) -> Detection:
        logits, boxes = self.raw(image, prompt)
        return select_boxes(logits, boxes, self.box_threshold)


__all__ = [
    "BOX_THRESHOLD",
    "GroundingDinoDetector",
    "OFFICIAL_GROUNDING_DINO",
    "TEXT_THRESHOLD",
    "preprocess_caption",
    "select_boxes",
]
