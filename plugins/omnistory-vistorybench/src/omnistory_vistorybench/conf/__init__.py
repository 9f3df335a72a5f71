"""The Hydra configs of omnistory-vistorybench: ``task/``, ``dataset/`` and ``system/``."""
