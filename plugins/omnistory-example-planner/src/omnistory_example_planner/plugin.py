"""The plugin module named by the ``omnistory`` entry point."""

from __future__ import annotations

import json
from typing import Any

from omnistory_core.api import Param, Planner, PlannerResponse, hookimpl


class InstructionPlanner(Planner):
    """Narration = the next page's text instruction; speech = the first speaker's intent."""

    name = "instruction"
    baseline = True  # a rule, not a model: its systems are reported as baselines
    version = "1"
    reads = ("conditions", "metadata")  # only these reach run_one, and only these key the cache
    # declared once: validated when built, listed by `plugins --params`, no yaml needed
    parameters = (
        Param(
            "fallback_utterance",
            str,
            "Look at that!",
            "spoken when no character has a speech intent",
        ),
    )

    def run_one(self, item: dict[str, Any]) -> PlannerResponse:
        from omnistory_core.kit.voices import resolve_gender

        conditions = item["conditions"] or {}
        characters = [c for c in conditions.get("characters") or [] if isinstance(c, dict)]
        speaker = next((c for c in characters if c.get("speech_intent")), None)
        name = str((speaker or {}).get("name") or "Narrator")
        sexes = {
            str(c.get("name", "")).lower(): str(c.get("sex", "")).lower()
            for c in (item["metadata"] or {}).get("characters") or []
            if isinstance(c, dict)
        }
        sex = sexes.get(name.lower())
        plan = {
            "narration": str(conditions.get("text_instruction") or "").strip(),
            "image_prompt": str(conditions.get("scene") or "").strip(),
            "speech": {
                "speaker": name,
                "utterance": str(
                    (speaker or {}).get("speech_intent") or self.params["fallback_utterance"]
                ),
                "emotion": "neutral",
                "speed": "normal",
                "pitch": "normal",
                "gender": resolve_gender(sex if sex in ("female", "male") else None, name),
            },
        }
        return PlannerResponse(json.dumps(plan, sort_keys=True))


@hookimpl
def register_planners(register):
    register(InstructionPlanner)


@hookimpl
def register_config_paths(register):
    register("pkg://omnistory_example_planner.conf")
