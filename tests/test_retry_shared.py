"""Planners and judges share one retry policy (omnistory_core.kit.retry): the same HTTP statuses are
retried, the same Retry-After is honoured.  Both go through the real openai SDK to a local server
that answers each status once, then a valid answer."""

from __future__ import annotations

from typing import Any

import pytest
from omnistory_eval.judges.backends.openai_compat import OpenAICompatibleBackend
from omnistory_eval.judges.render import RenderedPrompt
from omnistory_eval.judges.specs import JUDGE_SPECS
from omnistory_testkit import FakeServer, Reply, demo_planner_items

from omnistory_core.api import PlannerResponse, with_defaults
from omnistory_core.kit.planning.base import BASE_PARAMETERS
from omnistory_core.kit.planning.openai_chat import OpenAIChatPlanner
from omnistory_core.kit.retry import RETRYABLE_STATUSES, RetryPolicy

pytest.importorskip("openai")

STATUSES = (400, 401, 403, 404, 408, 409, 413, 422, 425, 429, 500, 502, 503, 504, 529)
JUDGE = JUDGE_SPECS["text-qwen3-30b-a3b"]


class ChatPlanner(OpenAIChatPlanner):
    """The core's OpenAI-chat planner as a plugin would subclass it."""

    name = "retry_probe"
    api_key_required = False
    parameters = with_defaults(BASE_PARAMETERS, model="probe-model")


def failing_once(status: int, headers: dict[str, str]) -> FakeServer:
    server = FakeServer(lambda body: Reply(text='{"ok": true}'))
    server.script("chat", Reply(status=status, headers=headers, message=f"status {status}"))
    return server


def planner_attempt(status: int, headers: dict[str, str]) -> tuple[int, Any]:
    with failing_once(status, headers) as server:
        planner = ChatPlanner(
            base_url=server.openai_base_url, max_retries=1, retry_base_delay_s=0.001, seed=0
        )
        (result,) = planner.run_batch(demo_planner_items(limit=1))
        planner.unload()
        return len(server.requests_for("chat")), result


def judge_attempt(status: int, headers: dict[str, str]) -> tuple[int, Any, list[float]]:
    waits: list[float] = []
    prompt = RenderedPrompt(
        judge_id=JUDGE.id, track="text", messages=[{"role": "user", "content": "rate"}], media=()
    )
    with failing_once(status, headers) as server:
        backend = OpenAICompatibleBackend(
            JUDGE, {"base_url": server.openai_base_url, "max_retries": 1}, sleep=waits.append
        )
        (generation,) = backend.generate([prompt])
        backend.close()
        return len(server.requests_for("chat")), generation, waits


def test_planners_and_judges_retry_the_same_statuses() -> None:
    retried: dict[str, set[int]] = {"planner": set(), "judge": set()}
    for status in STATUSES:
        n_planner, result = planner_attempt(status, {"retry-after": "0"})
        n_judge, generation, _ = judge_attempt(status, {"retry-after": "0"})
        if n_planner == 2:
            retried["planner"].add(status)
            assert isinstance(result, PlannerResponse), (status, result)
            assert result.usage["attempts"] == 2
        else:
            assert n_planner == 1 and result.category in ("model_error", "timeout"), status
            assert f"HTTP {status}" in result.message
        if n_judge == 2:
            retried["judge"].add(status)
            assert generation.error is None and generation.attempts == 2, status
        else:
            assert n_judge == 1 and f"HTTP {status}" in (generation.error or ""), status
    expected = {s for s in STATUSES if s in RETRYABLE_STATUSES}
    assert expected == {408, 409, 425, 429, 500, 502, 503, 504, 529}
    assert retried == {"planner": expected, "judge": expected}


@pytest.mark.parametrize(
    ("headers", "wait"),
    [({"Retry-After": "0.02"}, 0.02), ({"retry-after-ms": "30"}, 0.03)],
)
def test_planners_and_judges_wait_what_retry_after_asks(headers, wait) -> None:
    (
        _,
        result,
    ) = planner_attempt(429, headers)
    _, generation, waits = judge_attempt(429, headers)
    assert isinstance(result, PlannerResponse)
    assert result.usage["retry_wait_s"] == pytest.approx(wait)
    assert generation.error is None and waits == [pytest.approx(wait)]


def test_one_policy_class_and_one_module() -> None:
    backend = OpenAICompatibleBackend(JUDGE, {"base_url": "http://127.0.0.1:9/v1"})
    assert isinstance(backend.policy, RetryPolicy)
    planner = ChatPlanner(base_url="http://127.0.0.1:9/v1", seed=0)
    assert isinstance(planner.policy, RetryPolicy)
