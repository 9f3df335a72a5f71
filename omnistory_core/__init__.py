"""omnistory_core: run, extend and evaluate Omni-StoryBench story-continuation systems.

Importing this package is light on purpose (no torch, no model stacks); see the README.
"""

from __future__ import annotations


def _alias_source_configs() -> None:
    """Make ``omnistory_core.conf`` importable from a source checkout.

    Wheels ship the top-level ``conf/`` folder as the package ``omnistory_core.conf``; editable
    installs map it too.  But ``python -m omnistory_core`` run from the repository root imports this
    package from the checkout (the current directory comes first on ``sys.path``), where no
    ``omnistory_core/conf`` exists.  Point the name at ``<checkout>/conf`` in that one case.
    """
    import importlib.util
    import sys
    from pathlib import Path

    name = f"{__name__}.conf"
    if name in sys.modules:
        return
    try:
        if importlib.util.find_spec(name) is not None:
            return
    except (ImportError, ValueError):
        pass
    conf = Path(__file__).resolve().parent.parent / "conf"
    if not (conf / "__init__.py").exists() or not (conf / "config.yaml").exists():
        return
    spec = importlib.util.spec_from_file_location(
        name, conf / "__init__.py", submodule_search_locations=[str(conf)]
    )
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


_alias_source_configs()
