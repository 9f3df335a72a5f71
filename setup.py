"""Only here because the Hydra configs live in the top-level ``conf/`` folder yet must ship inside
the wheel as the ``omnistory_core.conf`` package; pyproject metadata cannot rename a folder."""

from setuptools import find_namespace_packages, setup

setup(
    packages=find_namespace_packages(
        include=["omnistory_core", "omnistory_core.*", "hydra_plugins", "hydra_plugins.*"]
    )
    + ["omnistory_core.conf"],
    package_dir={"omnistory_core.conf": "conf"},
)
