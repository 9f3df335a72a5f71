"""The Label Studio side of the human study: the labeling config and the rubric's control names.

One Label Studio project serves every track (text, image, speech, integrated) from one queue, as in
Appendix F.5.  Each task shows one *item* (a system's output for one transition in one track) as
HTML built by :mod:`omnistory_report.human.export`, and asks for the four rubric criteria of the
automated evaluation on the same 1–10 scale.  The four controls have track-independent names
(:data:`CONTROLS`); the item's HTML states the track's own wording, and the import maps control
``i`` to criterion ``i`` of the track (:data:`omnistory_eval.judges.rubric.CRITERIA`).
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from omnistory_eval.judges.rubric import CRITERIA, SCORE_MAX

#: Label Studio control names, in the order of each track's criteria.
CONTROLS: tuple[str, ...] = (
    "metadata_alignment",
    "continuity",
    "condition_compliance",
    "ground_truth_consistency",
)
CONTROL_TITLES: dict[str, str] = {
    "metadata_alignment": "1. Metadata alignment",
    "continuity": "2. Continuity from the current page",
    "condition_compliance": "3. Compliance with the generation conditions",
    "ground_truth_consistency": "4. Consistency with the ground truth",
}
#: the object tag every control rates (the item's HTML)
ITEM_TAG = "item"
#: task data keys written by the export and read back by the import
DATA_ITEM_ID = "item_id"
DATA_HTML = "html"


def criterion_of(track: str, control: str) -> str:
    """The track's criterion key rated by a control (``ValueError`` for an unknown control)."""
    return CRITERIA[track][CONTROLS.index(control)]


def labeling_config() -> str:
    """The project's labeling config (XML): the item as HTML, then four 1–10 ratings.

    Ratings use ``<Rating maxRating="10">`` (a value 1–10); the import also accepts a
    ``<Choices>`` control of the same name whose choice is the number as text.
    """
    lines = [
        "<View>",
        f'  <HyperText name="{ITEM_TAG}" value="${DATA_HTML}" inline="true"/>',
        '  <Header value="Rate each criterion from 1 (worst) to 10 (best); skip the task if you '
        'cannot judge it."/>',
    ]
    for control in CONTROLS:
        lines += [
            f'  <Header value={quoteattr(CONTROL_TITLES[control])} size="5"/>',
            f'  <Rating name="{control}" toName="{ITEM_TAG}" maxRating="{SCORE_MAX}" '
            f'icon="star" size="medium" required="true"/>',
        ]
    lines.append("</View>")
    return "\n".join(lines) + "\n"
