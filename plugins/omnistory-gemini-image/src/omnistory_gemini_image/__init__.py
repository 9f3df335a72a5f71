"""omnistory plugin: the ``nanobanana`` image expert (Gemini image models, google-genai)."""

__version__ = "0.1.0"
