"""Templates of ``python -m omnistory_core plugin new`` (see :mod:`omnistory_core.scaffold`).

``common/`` holds the files every plugin has; one folder per kind holds its component, preset and
test, and a backbone has one folder per shape (``backbone/``: any-to-any, ``backbone_text_image/``:
T+I, ``backbone_text_speech/``: T+S). Placeholders are :class:`string.Template` ones (``${name}``,
``${package}``, ``${cls}`` ...).
"""
