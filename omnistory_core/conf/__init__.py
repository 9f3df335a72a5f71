"""omnistory's Hydra configs (shipped as the package ``omnistory_core.conf``).

Importing it registers the ``omnistory_system_id`` and ``omnistory_job_name`` resolvers that
``config.yaml`` uses, so the Hydra app and the compose API (tests, notebooks) resolve
``system_id`` and the job directories alike.
"""

from omegaconf import ListConfig, OmegaConf


def _system_id(*, _root_):
    from omnistory_core.engine.system import derived_system_id

    return derived_system_id(_root_)


def _job_name(*, _root_):
    from omnistory_core.tasks import job_name_of

    return job_name_of(_root_)


if not OmegaConf.has_resolver("omnistory_system_id"):
    OmegaConf.register_new_resolver("omnistory_system_id", _system_id)
if not OmegaConf.has_resolver("omnistory_job_name"):
    OmegaConf.register_new_resolver("omnistory_job_name", _job_name)


#: the line ``suite=demo`` prints when no real-weight stand-in metric is installed
STAND_IN_HINT = (
    "suite=demo: no real-weight stand-in metric is installed, so the leaderboard has no numbers;"
    " for real ones: pip install './plugins/omnistory-eval[real]' ./plugins/omnistory-report"
)
_hinted: list[bool] = []


def _no_stand_ins() -> ListConfig:
    """``${omnistory_stand_in_metrics:}`` without omnistory-eval: none (it replaces this one with
    the stand-ins whose packages are installed)."""
    if not _hinted:
        import sys

        _hinted.append(True)
        print(STAND_IN_HINT, file=sys.stderr)
    # a ListConfig: OmegaConf.resolve() cannot store a plain list a resolver returns
    return ListConfig([])


if not OmegaConf.has_resolver("omnistory_stand_in_metrics"):
    OmegaConf.register_new_resolver("omnistory_stand_in_metrics", _no_stand_ins)
