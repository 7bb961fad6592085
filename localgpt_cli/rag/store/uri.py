"""Where a store lives: a folder on this machine, or an object store.

One rule, asked in many places (whether opening would create a folder, where the lock
and the manifests go, what `docs stats` can measure on disk): a plain path or a
`file://` URI is a folder here; anything else with a scheme (`s3://`, `gs://`, `az://`)
is an object store that LanceDB reaches over the network.
"""

from __future__ import annotations

from pathlib import Path

FILE_SCHEME = "file://"


def local_path(uri: str) -> Path | None:
    """The folder of a store on this machine, or None for an object store."""
    if uri.startswith(FILE_SCHEME):
        return Path(uri[len(FILE_SCHEME) :])
    if "://" in uri:
        return None
    return Path(uri)
