"""A Hydra launcher that runs each job of a sweep as a Ray task (``hydra/launcher=ray``)."""
