"""omnistory plugin: Story-Adapter, ``image=storyadapter`` (from a checkout)."""

__version__ = "0.1.0"
