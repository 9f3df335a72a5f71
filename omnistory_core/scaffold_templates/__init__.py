"""Templates of ``python -m omnistory_core plugin new`` (see :mod:`omnistory_core.scaffold`).

``common/`` holds the files every plugin has; one folder per kind holds its component, preset and
test. Placeholders are :class:`string.Template` ones (``${name}``, ``${package}``, ``${cls}`` ...).
"""
