"""Single-character action (``single_character_action``): a VLM judge on CIDS's matched crops.

As the official CIDS evaluator does (``bench/content/cids_evaluator.py``, the block after the
Hungarian assignment), only when a judge endpoint is configured: for every shot that reaches
the assignment (it has candidate crops and at least one character whose encoder embedded one),
each character matched to a crop is asked about once -- the rubric
``user_prompt_single_character_text_align.txt`` as the system message, then the shot's
``script`` (Static Shot Description, English), ``"Evaluated Character Name is <name>"`` and the
crop (resized to 512x512, JPEG, ``detail: low``) -- through the same query loop as prompt
alignment (:class:`.alignment_judge.AlignmentJudge`: temperature 0, +0.1 after each unparsable
answer, 10 tries, seed 123, ``top_p`` not sent with ``faithful``).  The answer is parsed with
the official regex (:func:`.alignment_judge.parse_score`).

Per shot the value is ``int(round(mean))`` of its characters' scores (0 for a shot whose
characters were all left unmatched), per story ``int(round(mean))`` of the shots
(:func:`.math.single_character_action_shot` / ``_story``).  With ``faithful``, a crop whose
answers never parse scores 0 as the official's; otherwise it is left out (the shot, and the
story, from the parsed crops; nothing parsed: None, an ``invalid`` row for this criterion).
A request that fails after the retry policy makes the story an ``error`` row (recomputed next
run), never a 0: the official would retry forever.

Without an endpoint the criterion is not produced (None: an ``invalid`` row), as the official
leaves the key out when ``BASE_URL``/``API_KEY`` are unset; its leaderboard then ranks the
missing value worst, as ours does.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omnistory_core.api import ComponentError
from omnistory_core.kit.retry import RetryPolicy, map_bounded
from omnistory_vistorybench.metrics import math as vmath
from omnistory_vistorybench.metrics.alignment_judge import (
    SINGLE_CHARACTER_RUBRIC,
    AlignmentJudge,
    Verdict,
    image_base64,
    single_character_messages,
)

CRITERION = "single_character_action"


@dataclass
class ActionShot:
    """A shot that reached the assignment: its index, ``script`` and matched
    ``(character key, character name, crop)`` triples, in the shot's character order."""

    index: int
    script: str
    matched: list[tuple[str, str, Any]] = field(default_factory=list)


@dataclass
class ActionOutcome:
    """The story's value (None: not produced / nothing parsed), the per-shot detail, and the
    first request error (the story is then an ``error`` row)."""

    value: float | None
    detail: dict[str, Any]
    error: str | None = None


def read_rubric(rubric_dir: str | None) -> str:
    """The official single-character rubric text, or a ``skipped:`` ComponentError."""
    hint = (
        "set rubric_dir= to <ViStoryBench checkout>/vistorybench/bench/prompt_align/user_prompts"
        " (or judge_base_url= null to leave single_character_action out)"
    )
    if not rubric_dir:
        raise ComponentError(f"skipped: metric=cids needs {SINGLE_CHARACTER_RUBRIC}; {hint}")
    file = Path(os.path.expanduser(rubric_dir)) / SINGLE_CHARACTER_RUBRIC
    if not file.is_file():
        raise ComponentError(f"skipped: {file} not found; {hint}")
    return file.read_text(encoding="utf-8")


def rubric_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class SingleCharacterAction:
    """Asks the judge about every matched crop of a story and aggregates as the official."""

    def __init__(
        self, judge: AlignmentJudge, rubric: str, *, faithful: bool = True, concurrency: int = 4
    ):
        self.judge = judge
        self.rubric = rubric
        self.faithful = faithful
        self.concurrency = max(1, int(concurrency))

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> SingleCharacterAction | None:
        """The judge of the CIDS metric's ``judge_*`` parameters; None without
        ``judge_base_url`` (the criterion is then not produced)."""
        base_url = params.get("judge_base_url")
        if not base_url:
            return None
        rubric = read_rubric(params.get("rubric_dir"))
        faithful = bool(params.get("faithful", True))
        env = str(params.get("judge_api_key_env") or "")
        wait = float(params.get("judge_max_retry_wait_s", 60.0))
        policy = RetryPolicy(
            max_retries=int(params.get("judge_max_retries", 5)),
            base_delay_s=float(params.get("judge_retry_base_delay_s", 1.0)),
            max_delay_s=wait,
            max_retry_after_s=wait,
        )
        judge = AlignmentJudge(
            base_url=str(base_url),
            # a local server needs no key; the SDK refuses an empty one
            api_key=(os.environ.get(env) if env else None) or "EMPTY",
            model=str(params.get("judge_model") or "gpt-4.1"),
            # the official passes top_p=0.2 to a helper that never sends it
            top_p=None if faithful else 0.2,
            max_tries=int(params.get("judge_max_tries", 10)),
            timeout=float(params.get("judge_timeout", 120.0)),
            policy=policy,
        ).load()
        concurrency = int(params.get("judge_concurrency", 4))
        return cls(judge, rubric, faithful=faithful, concurrency=concurrency)

    def close(self) -> None:
        self.judge.close()

    def messages(self, shot: ActionShot, name: str, crop: Any) -> list[dict[str, Any]]:
        return single_character_messages(self.rubric, shot.script, name, image_base64(crop))

    def score(self, shots: Sequence[ActionShot]) -> ActionOutcome:
        questions = [(s, key, name, crop) for s in shots for key, name, crop in s.matched]
        verdicts = map_bounded(
            lambda q: self.judge.ask(self.messages(q[0], q[2], q[3])), questions, self.concurrency
        )
        by_shot: dict[int, list[tuple[str, str, Verdict]]] = {s.index: [] for s in shots}
        error = None
        for (shot, key, name, _), verdict in zip(questions, verdicts, strict=True):
            if isinstance(verdict, BaseException):
                verdict = Verdict("error", error=f"{type(verdict).__name__}: {verdict}")
            if verdict.status == "error" and error is None:
                error = f"shot {shot.index}, character {key!r}: {verdict.error}"
            by_shot[shot.index].append((key, name, verdict))
        detail: dict[str, Any] = {}
        shot_values: list[float | None] = []
        for shot in shots:
            value, chars = self._shot(by_shot[shot.index])
            shot_values.append(value)
            detail[str(shot.index)] = {CRITERION: value, "characters": chars}
        story = vmath.single_character_action_story(shot_values, faithful=self.faithful)
        return ActionOutcome(story, detail, error)

    def _shot(self, answers: list[tuple[str, str, Verdict]]) -> tuple[float | None, dict]:
        """A shot's value and its per-character detail."""
        per_char: dict[str, float] = {}
        chars: dict[str, Any] = {}
        for key, name, verdict in answers:
            chars[key] = {"name": name, **verdict.detail()}
            if verdict.status == "ok":
                score: float | None = float(verdict.score or 0)
            elif verdict.status == "unparsed" and self.faithful:
                score = 0.0  # the official's score after 10 unparsable answers
            else:
                score = None
            chars[key]["score"] = score
            if score is not None:
                # faithful: keyed by name as the official's dict (a repeated name counts once)
                per_char[name if self.faithful else key] = score
        return vmath.single_character_action_shot(
            list(per_char.values()), faithful=self.faithful
        ), chars


__all__ = [
    "ActionOutcome",
    "ActionShot",
    "CRITERION",
    "SingleCharacterAction",
    "read_rubric",
    "rubric_sha256",
]
