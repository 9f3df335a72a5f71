"""omnistory plugin: the AMD Nitro-T-1.2B image expert ``nitro``."""

__version__ = "0.1.0"
