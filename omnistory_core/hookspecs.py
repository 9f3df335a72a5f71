"""Plugin hooks (pluggy project name ``omnistory``, entry-point group ``omnistory``).

Each hook receives a ``register`` callback; call it once per thing you add.  Built-in components
register through exactly these hooks (``omnistory_core.builtin``).  A plugin implementing a hook
that is not defined here (``register_planner``), or with another signature than ``(register)``, is
not loaded (one warning line with a did-you-mean, and ``python -m omnistory_core plugins`` shows
it); the other plugins are unaffected, and in a sweep only the jobs that use the plugin's components
or configs fail (their ``job_error.json`` names the plugin and why).  ``check_component`` of the
plugin kit checks the hook module the same way, so a plugin's own tests catch it.

Example plugin module (named by ``[project.entry-points.omnistory] mymodel = "mypkg.plugin"``)::

    from omnistory_core.hookspecs import hookimpl

    @hookimpl
    def register_planners(register):
        register(MyPlanner)

    @hookimpl
    def register_config_paths(register):
        register("pkg://mypkg.conf")   # a package holding planner/mymodel.yaml, system/*.yaml ...
"""

from __future__ import annotations

import pluggy

hookspec = pluggy.HookspecMarker("omnistory")
hookimpl = pluggy.HookimplMarker("omnistory")


@hookspec
def register_planners(register):
    """Register :class:`omnistory_core.components.Planner` subclasses."""


@hookspec
def register_image_experts(register):
    """Register :class:`omnistory_core.components.ImageExpert` subclasses."""


@hookspec
def register_tts_experts(register):
    """Register :class:`omnistory_core.components.TTSExpert` subclasses."""


@hookspec
def register_backbones(register):
    """Register :class:`omnistory_core.components.Backbone` subclasses (semi-orchestration and
    any-to-any models); each declares ``produces``, the modalities it makes natively."""


@hookspec
def register_metrics(register):
    """Register :class:`omnistory_core.components.Metric` subclasses."""


@hookspec
def register_judges(register):
    """Register :class:`omnistory_core.components.Judge` subclasses."""


@hookspec
def register_datasets(register):
    """Register dataset loaders: ``register(name, loader)`` where
    ``loader(spec) -> list[StoryExample]`` and ``spec`` is the ``dataset`` config mapping."""


@hookspec
def register_tasks(register):
    """Register benchmarks: ``register(task)`` with a :class:`omnistory_core.tasks.Task` (what a
    benchmark's records, inputs, output slots, layout, tracks and aggregation are)."""


@hookspec
def register_commands(register):
    """Register subcommands of ``python -m omnistory_core``: ``register(name, main, help)`` where
    ``main(argv: list[str]) -> int`` is the exit status (``evaluate``, ``report``, ...)."""


@hookspec
def register_evaluation(register):
    """Register the evaluation service the end of a sweep and its dry run use:
    ``register(service)`` with a :class:`omnistory_core.seams.EvaluationService`
    (``omnistory-eval`` registers one; the first registered is used)."""


@hookspec
def sweep_finished(sweep_dir, config):
    """Called once at the end of a ``-m`` sweep, after the evaluation (if any), with the sweep
    directory and the sweep's config; return an exit status (0 = fine) or None.  The report
    distribution builds the report here."""


@hookspec
def register_config_paths(register):
    """Register Hydra search-path entries (``pkg://package.conf`` or ``file:///abs/dir``) holding
    the plugin's config groups; they are appended only for omnistory's own app."""
