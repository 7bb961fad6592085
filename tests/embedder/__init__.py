"""all-MiniLM-L6-v2 in NumPy and a disk cache of its vectors, for the test stand-in.

Plug into the stand-in as `standin.set_embedder("all-minilm:latest", embedder.embed)`
with `embedder = CachedEmbedder(MiniLM())`; skip a test only when `available()` is false.
"""

from tests.embedder.cache import DEFAULT_CACHE_DIR, CachedEmbedder
from tests.embedder.minilm import DIM, MODEL_NAME, MiniLM, available

__all__ = ["DEFAULT_CACHE_DIR", "DIM", "MODEL_NAME", "CachedEmbedder", "MiniLM", "available"]
