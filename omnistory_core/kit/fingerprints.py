"""Content fingerprints of local weights, for plugin authors: see
:mod:`omnistory_core.fingerprints` (declare ``Param(..., weights=True)`` or override
:meth:`~omnistory_core.components.Component.weights_files`; the engine keys calls by them)."""

from omnistory_core.fingerprints import (
    CACHE_ENV,
    cache_dir,
    file_digest,
    local_weights,
    weights_fingerprint,
)

__all__ = ["CACHE_ENV", "cache_dir", "file_digest", "local_weights", "weights_fingerprint"]
