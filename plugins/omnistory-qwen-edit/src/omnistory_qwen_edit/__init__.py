"""omnistory plugin: Qwen-Image-Edit-2509 image experts ``qwen_edit`` and ``qwen_edit_story``."""

__version__ = "0.1.0"
