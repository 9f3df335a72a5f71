"""Provider batches for hosted image experts (``image.batch=true``): a stage's pictures drawn
through the provider's batch API at :data:`~omnistory_core.kit.batches.BATCH_DISCOUNT` of the
price, with the planners' loop and ledger (:mod:`omnistory_core.kit.batches`).

A hosted image expert (:class:`~omnistory_core.kit.hosted_images.HostedImageExpert`) whose
provider has a batch API names it (``batch_provider``), declares
:func:`~omnistory_core.kit.batches.batch_parameters` and writes four hooks: ``batch_route``
(the endpoint a request's batch goes to: OpenAI takes one endpoint per batch),
``batch_api(route)`` (the provider's protocol), ``batch_body`` (the request as a batch line
carries it: the content of the synchronous request) and ``batch_reply`` (an answer ->
``ImageReply``).  :class:`BatchDrawer` draws a list of requests with them:

* every request's ``custom_id`` is the sha256 of its body; each route's requests go in that
  route's batches (the routes side by side); :func:`~omnistory_core.kit.batches.run_batches`
  submits, polls, reads the results and decides the fallbacks;
* an answer with an image is the request's output, its usage saying ``batch: true``,
  ``batch_id``, ``batch_calls: 1`` and the cost at the batch discount; a declined answer is its
  ``refused`` failure; an answer without an image its ``empty_output`` (asked again the
  synchronous way when ``empty_retries`` > 0);
* an error the provider answered for one request inside the batch: a transient one (429, 5xx,
  Gemini's RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE...) sends the request the synchronous way,
  as the planners' errored lines are; any other (:class:`RequestError`: an invalid request, a
  moderation refusal) is the request's failure with the provider's message, since sending it
  again would get the same answer;
* requests of an expired, cancelled, failed or unknown batch, requests too big for a batch and
  requests whose body cannot be built go the synchronous way, one by one with the expert's
  retries (``batch_fallback_calls: 1`` in their usage);
* a request whose batch had not ended within ``batch_wait_s`` is a ``batch_pending`` failure,
  one whose batch could not be polled a transient one; both are ``waiting``: the next run polls.

**Held ledger entries.**  An entry whose result came back stays in the ledger until the caller
says the call it belongs to is final (:meth:`BatchDrawer.settle`).  A ViStoryBench story call
chains its shots: when shot 3's batch is still pending, the next run needs the outputs of shots
1 and 2 again to rebuild shot 3's request, and re-reads their ended batches instead of submitting
them again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnistory_core.contract import BATCH_PENDING, Failure
from omnistory_core.engine.failures import TRANSIENT_CATEGORIES
from omnistory_core.kit.batches import (
    BatchLedger,
    BatchOutcome,
    BatchSettings,
    custom_id,
    retrying,
    run_batches,
)
from omnistory_core.kit.retry import map_bounded

log = logging.getLogger("omnistory")


@dataclass(frozen=True)
class RequestError:
    """An error the provider answered for one request of an ended batch that sending it again
    would not fix: that request's failure (``category``: ``refused`` for a content refusal, else
    ``model_error``), with the provider's message."""

    category: str
    message: str


@dataclass
class Drawn:
    """One request's result in batch mode, the ledger id of its request (None: it was not
    batched) and whether it still waits on its batch (the next run polls it)."""

    result: Any
    cid: str | None = None
    waiting: bool = False

    @property
    def final(self) -> bool:
        """Whether the result stays: a re-run (``engine.retry_failures=errors``) keeps it."""
        if isinstance(self.result, BaseException):
            return False
        if isinstance(self.result, Failure):
            return self.result.category not in TRANSIENT_CATEGORIES
        return True


class HeldLedger(BatchLedger):
    """A ledger whose removals wait for :meth:`release` (see the module doc)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.collected: set[str] = set()
        self._lock = threading.Lock()

    def remove(self, cids: Iterable[str]) -> None:
        with self._lock:
            self.collected.update(cids)

    def release(self, cids: Iterable[str]) -> None:
        """Forget the entries of ``cids`` that :func:`run_batches` is done with."""
        with self._lock:
            done = [cid for cid in cids if cid in self.collected]
            self.collected.difference_update(done)
        super().remove(done)


class BatchDrawer:
    """Draws requests of ``expert`` through its provider's batches (see the module doc); the
    ledger lives under ``<store_root>/batches/image-<name>/`` (in memory without a store)."""

    def __init__(self, expert: Any, store_root: Path | str | None):
        self.expert = expert
        self.label = f"image={expert.name}"
        self.ledger = HeldLedger(
            store_root,
            f"{expert.kind}-{expert.name}",
            provider=str(expert.batch_provider),
            endpoint=expert.batch_server(),
        )

    def draw(self, requests: Sequence[Any]) -> list[Drawn]:
        """One :class:`Drawn` per request, in order."""
        expert = self.expert
        drawn: list[Drawn | None] = [None] * len(requests)
        routes: dict[str, dict[str, int]] = {}  # route -> custom_id -> a request that builds it
        cids: dict[int, str] = {}
        synchronous: list[int] = []
        for index, request in enumerate(requests):
            problem = expert.check_request(request)
            if problem is not None:
                drawn[index] = Drawn(problem)
                continue
            try:
                route = expert.batch_route(request)
                cid = custom_id(expert.batch_body(request))
            except (OSError, ValueError):  # the synchronous path reports it as it always does
                synchronous.append(index)
                continue
            cids[index] = cid
            routes.setdefault(route, {}).setdefault(cid, index)
        outcomes = self._run(requests, routes)
        for index, cid in cids.items():
            outcome = outcomes[cid]
            if outcome.status == "ok":
                result = expert.batch_result(outcome.response, outcome.batch_id)
                if result is None:
                    synchronous.append(index)
                else:
                    drawn[index] = Drawn(result, cid)
            elif outcome.status == "fallback":
                synchronous.append(index)
            else:
                category = BATCH_PENDING if outcome.status == "pending" else outcome.category
                failure = Failure(category, expert.scrub(outcome.reason))
                drawn[index] = Drawn(failure, cid, waiting=True)
        answers = map_bounded(
            expert.draw,
            [requests[i] for i in synchronous],
            int(expert.params["max_concurrency"]),
        )
        for index, answer in zip(synchronous, answers, strict=True):
            usage = getattr(answer, "usage", None)
            if isinstance(usage, dict):
                usage["batch_fallback_calls"] = 1
            drawn[index] = Drawn(answer, cids.get(index))
        assert all(d is not None for d in drawn)
        return [d for d in drawn if d is not None]

    def _run(
        self, requests: Sequence[Any], routes: dict[str, dict[str, int]]
    ) -> dict[str, BatchOutcome]:
        expert = self.expert
        call = retrying(expert.classify_error, expert.policy, scrub=expert.scrub)
        client = expert.client

        def one(route: str) -> dict[str, BatchOutcome]:
            first = routes[route]
            api = expert.batch_api(route)
            return run_batches(
                api,
                client,
                list(first),
                # built again when its batch is written: one batch's images in memory, not all
                lambda cid: expert.batch_body(requests[first[cid]]),
                self.ledger,
                BatchSettings.from_params(expert.params, api.limits),
                call=call,
                label=self.label if len(routes) == 1 else f"{self.label} ({route})",
            )

        outcomes: dict[str, BatchOutcome] = {}
        for found in map_bounded(one, list(routes), max(1, len(routes))):
            if isinstance(found, BaseException):
                raise found
            outcomes.update(found)
        return outcomes

    def settle(self, calls: Iterable[Iterable[Drawn]]) -> None:
        """Forget the ledger entries of every call (the :class:`Drawn` of its requests) whose
        results are all final; a call with a result still to recompute keeps every entry, so
        that the next run re-reads its ended batches instead of submitting them again."""
        keep: set[str] = set()
        free: set[str] = set()
        for call in calls:
            members = list(call)
            target = free if all(d.final for d in members) else keep
            target.update(d.cid for d in members if d.cid)
        self.ledger.release(free - keep)


__all__ = ["BatchDrawer", "Drawn", "HeldLedger", "RequestError"]
