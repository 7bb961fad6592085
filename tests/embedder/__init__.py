"""all-MiniLM-L6-v2 in NumPy and a disk cache of its vectors, for the test stand-in.

Plug into the stand-in as `standin.set_embedder("all-minilm:latest", shared_embedder().embed)`;
skip a real-model test only when `available()` is false.
"""

from __future__ import annotations

import functools

from tests.embedder.cache import DEFAULT_CACHE_DIR, CachedEmbedder
from tests.embedder.minilm import DIM, MODEL_NAME, MiniLM, available


@functools.lru_cache(maxsize=1)
def shared_embedder() -> CachedEmbedder:
    """One cached model per test process: the weights load once, vectors persist on disk
    in `tests/.cache/embeddings/` across runs."""
    return CachedEmbedder(MiniLM(), DEFAULT_CACHE_DIR)


__all__ = [
    "DEFAULT_CACHE_DIR",
    "DIM",
    "MODEL_NAME",
    "CachedEmbedder",
    "MiniLM",
    "available",
    "shared_embedder",
]
