"""A command's config composed once instead of twice.

Hydra's entry point composes the config once to read ``hydra.mode`` (``Hydra.get_mode``, always
in multirun mode) and then again to run it or sweep it.  Each composition of this project's config
takes about 0.3 s of CPU, a third of a small run's start-up, paid by every command and every
process a test starts.  :func:`composing_once` composes the first time in the mode the command
line asks for and hands that config to the run or the sweep; a command line whose config does not
compose in that mode gets Hydra's own path, so every error and every ``hydra.mode`` a config sets
is what Hydra gives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def composing_once(multirun: bool) -> Iterator[None]:
    """Within it, Hydra's entry point composes the command's config once (``multirun``: the
    command line has ``-m``/``--multirun``)."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.hydra import Hydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.types import RunMode

    mode = RunMode.MULTIRUN if multirun else RunMode.RUN
    load = ConfigLoaderImpl.load_configuration
    get_mode = Hydra.get_mode
    kept: dict[tuple[Any, ...], Any] = {}

    def first_mode(self: Any, config_name: str | None, overrides: list[str]) -> Any:
        try:
            cfg = load(
                self.config_loader,
                config_name=config_name,
                overrides=list(overrides),
                run_mode=mode,
                validate_sweep_overrides=False,
            )
        except Exception:  # noqa: BLE001 - Hydra's own path composes it and reports why
            return get_mode(self, config_name, overrides)
        if cfg.hydra.mode is not None:
            kept[(config_name, tuple(overrides), mode)] = cfg
            return cfg.hydra.mode
        # Hydra then composes again with this override added (``_run_app``): what it does to
        # the config, done here
        override = f"hydra.mode={mode.name}"
        cfg.hydra.mode = mode
        cfg.hydra.overrides.hydra.append(override)
        kept[(config_name, (*overrides, override), mode)] = cfg
        return None

    def load_configuration(
        self: Any,
        config_name: str | None,
        overrides: list[str],
        run_mode: Any,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> Any:
        cfg = kept.pop((config_name, tuple(overrides), run_mode), None)
        if cfg is None:
            return load(
                self, config_name, overrides, run_mode, from_shell, validate_sweep_overrides
            )
        if validate_sweep_overrides:
            ConfigLoaderImpl.validate_sweep_overrides_legal(
                overrides=OverridesParser.create().parse_overrides(overrides=overrides),
                run_mode=run_mode,
                from_shell=from_shell,
            )
        return cfg

    Hydra.get_mode = first_mode
    ConfigLoaderImpl.load_configuration = load_configuration
    try:
        yield
    finally:
        Hydra.get_mode = get_mode
        ConfigLoaderImpl.load_configuration = load
