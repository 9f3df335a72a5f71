"""Every official quirk that a scoring function of :mod:`.math` keeps with ``faithful=True`` (the
default, so that our numbers match the published ones), with the principled alternative it
computes with ``faithful=False``: ``(metric, quirk, faithful behaviour, alternative)``.

Plain data, below :mod:`omnistory_vistorybench.fidelity`, which renders it into the plugin README's
Fidelity table (a test holds the two equal).
"""

from __future__ import annotations

#: (metric, quirk, faithful behaviour, alternative with ``faithful=False``)
FIDELITY: tuple[tuple[str, str, str, str], ...] = (
    (
        "occm",
        "a shot whose listed image file is missing counts D=0, even when it expects no"
        " character (E=0): exp(0) scores it 100",
        "counted (100 for E=0)",
        "E=0 shots are always skipped",
    ),
    (
        "occm",
        "a story with no scored shot",
        "0.0",
        "None (undefined)",
    ),
    (
        "cids_cross_mean, cids_self_mean",
        "per-character values and story means are rounded to 4 decimals",
        "rounded",
        "full precision",
    ),
    (
        "cids_self_mean",
        "a character matched in exactly one shot has self-similarity 1.0 (CSD gives 0.0 to"
        " a single image)",
        "1.0, averaged in",
        "None, left out of the story mean",
    ),
    (
        "cids_cross_mean, cids_self_mean, occm, copy_paste_score",
        "references are globbed as **/*.jpg: .png/.jpeg (and .JPG) references are ignored",
        "lower-case .jpg references only",
        "every image reference",
    ),
    (
        "cids_cross_mean, cids_self_mean, occm, copy_paste_score",
        "a shot listing a character key the story does not define counts it in E, and fails"
        " the story (KeyError) once the shot has detections",
        "counted in E; story invalid",
        "the key is ignored",
    ),
    (
        "copy_paste_score",
        "a story with no matched character",
        "0.0",
        "None (undefined)",
    ),
    (
        "self_csd",
        "fewer than two images",
        "0.0",
        "None (undefined)",
    ),
    (
        "self_csd, aesthetic_score",
        "every image in the story's output folder is used, not only the story's shots"
        " (CIDS and prompt alignment use the shots)",
        "story_images",
        "the images of candidate_shots",
    ),
    (
        "cross_csd",
        "an onstage character without references (or an unknown key), and a shot with no"
        " onstage character, are compared with the first character that has references",
        "fallback to the first character with references",
        "that character / shot is skipped",
    ),
    (
        "self_csd, cross_csd, aesthetic_score",
        "a story with no output image (or, for cross_csd, no scored shot)",
        "0.0",
        "None (undefined)",
    ),
    (
        "aesthetic_score",
        "the SigLIP processor is loaded but not applied: pixels go in as [0, 1] after"
        " Resize((378, 378)) + ToTensor()",
        "no mean/std normalisation",
        "the processor's mean/std applied",
    ),
    (
        "inception_score",
        "a run with no image",
        "0.0",
        "None (undefined)",
    ),
    (
        "scene, camera, character_action",
        "no score parsed after 10 tries (temperature +0.1 each)",
        "score 0",
        "status invalid, score None",
    ),
    (
        "single_character_action",
        "a matched crop whose answer parses in none of 10 tries (temperature +0.1 each)",
        "score 0, averaged in",
        "the crop is left out (nothing parsed in the story: None, an invalid row)",
    ),
    (
        "single_character_action",
        "a shot's character scores are kept in a dict keyed by character name: two onstage"
        " characters with the same name count once (the later one)",
        "keyed by name",
        "keyed by character key",
    ),
    (
        "scene, camera, character_action, single_character_action",
        "top_p=0.2 is passed to the query helper, which never puts it in the request",
        "top_p not sent",
        "top_p sent",
    ),
    (
        "scene, camera, character_action",
        "a story with no scored shot (story mean)",
        "0",
        "None (undefined)",
    ),
    (
        "scene, camera, character_action",
        "evaluators reload stories in English: a 'ch' run is scored against English shot text",
        "English text",
        "the text in the run's language",
    ),
    (
        "single_character_action",
        "per-shot and story means are rounded to an integer (round half to even)",
        "int(round(mean))",
        "float means",
    ),
    (
        "single_character_action",
        "a shot with detections but no matched character scores 0",
        "0, averaged in",
        "skipped",
    ),
    (
        "single_character_action",
        "evaluators reload stories in English: a 'ch' run's judge is told the character's"
        " English name",
        "English name (name_en)",
        "the name in the run's language",
    ),
    (
        "cids_cross_mean, cids_self_mean, occm, copy_paste_score, scene, camera, character_action",
        "a story whose output folder has images but none at a story.json index is scored"
        " (only a story without any image is skipped): every value 0",
        "scored 0 (prompt alignment: each shot row 0, so the story mean is 0)",
        "left out (invalid rows)",
    ),
)


__all__ = ["FIDELITY"]
