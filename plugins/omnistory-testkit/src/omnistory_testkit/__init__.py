"""The plugin kit: what a plugin's tests need to exercise a component without weights or network.

* :func:`check_component` -- run a component through the real engine on the bundled demo (or,
  ``task=NAME``, on that task's bundled fixture through its own job path) and assert the
  contract (identity, ``reads``, light import, output types, load only on a cache miss,
  same seed same output, output vs runtime parameters in the cache key, failures as data); a
  metric or judge scores a tiny built-in run through the evaluation runner instead (rows and
  statuses, score range, nothing computed or loaded when cached, same scores twice, result keys,
  a raising item and an unreadable file as ``invalid``/``error`` rows);
* :class:`FakeServer` / :class:`Reply` -- a local server speaking the OpenAI Chat Completions,
  Anthropic Messages and vLLM wire protocols, with scripted answers, for API components, and the
  providers' batch APIs (OpenAI Files + Batches, Anthropic Message Batches; :class:`BatchFate`
  scripts a batch's end);
* :func:`run_cli` -- ``python -m omnistory_core ...`` in a subprocess, as a user runs it
  (forked from a warm interpreter with ``OMNISTORY_TESTKIT_FORK=1``:
  :mod:`~omnistory_testkit.forkserver`);
* :func:`demo_planner_items` -- the inputs the engine builds for the first demo examples;
* :mod:`omnistory_testkit.engine` -- what the engine does around a component, for a test that
  drives it by hand: demo examples and items, what reaches a component and its call keys, the
  installed registry and systems composed from a config, a job run through a call store;
* :mod:`omnistory_testkit.checkpoints` -- tiny tokenizers and seeding for random checkpoints
  built inside a test (imports ``tokenizers``/``transformers``/``torch`` only when called);
* :mod:`omnistory_testkit.standins` -- stand-ins for every installed model component, so a
  real sweep runs offline.

Importing this package imports nothing heavy (standard library and ``omnistory_core`` only).
"""

from __future__ import annotations

from omnistory_testkit.chat_server import LocalChatServer, completion_body
from omnistory_testkit.conformance import (
    HEAVY_MODULES,
    ConformanceError,
    ConformanceReport,
    check_component,
    registry_with,
)
from omnistory_testkit.engine import (
    build_component,
    call_key,
    check_produces,
    config_node,
    demo_examples,
    demo_items,
    example_items,
    fixture_call_keys,
    fixture_items,
    inputs_for,
    installed_registry,
    job_config,
    materialize,
    media,
    open_store,
    paradigm_of,
    prefetch_checkpoints,
    recomputed,
    resolve_system,
    run_job,
)
from omnistory_testkit.runs import demo_planner_items, files_containing, run_cli
from omnistory_testkit.servers import (
    VALID_PLAN,
    BatchFate,
    FakeServer,
    RecordedRequest,
    Reply,
)

__all__ = [
    "HEAVY_MODULES",
    "VALID_PLAN",
    "BatchFate",
    "ConformanceError",
    "ConformanceReport",
    "FakeServer",
    "LocalChatServer",
    "RecordedRequest",
    "Reply",
    "build_component",
    "call_key",
    "check_component",
    "check_produces",
    "completion_body",
    "config_node",
    "demo_examples",
    "demo_items",
    "demo_planner_items",
    "example_items",
    "files_containing",
    "fixture_call_keys",
    "fixture_items",
    "inputs_for",
    "installed_registry",
    "job_config",
    "materialize",
    "media",
    "open_store",
    "paradigm_of",
    "prefetch_checkpoints",
    "recomputed",
    "registry_with",
    "resolve_system",
    "run_cli",
    "run_job",
]
