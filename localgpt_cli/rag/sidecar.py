"""Where localgpt keeps its own files: beside the LanceDB store they describe.

The ingest lock and the manifests protect and describe one store, so they live with it
(`<store>/_localgpt/`), not in the home of whoever ingests: two homes (two machines, two
users) pointed at one `LOCALGPT_DB` or one `s3://` URI then share one lock and one
manifest, instead of writing the same table at once. LanceDB lists only `*.lance`
folders as tables, so the sidecar folder is invisible to it.

Object stores other than S3 (`gs://`, `az://`, ...) have no lease implementation here:
their lock and manifests stay in the home, as before, and only one home may write them.
"""

from __future__ import annotations

from pathlib import Path

from localgpt_cli.rag.s3 import split_uri
from localgpt_cli.rag.store.uri import local_path

SIDECAR = "_localgpt"


def local_dir(db_uri: str) -> Path | None:
    """The sidecar folder of a store on a local path (`file://` included), else None."""
    folder = local_path(db_uri)
    return None if folder is None else folder / SIDECAR


def s3_location(db_uri: str) -> tuple[str, str] | None:
    """(bucket, key prefix of the sidecar) of an `s3://` store, else None."""
    if not db_uri.startswith("s3://"):
        return None
    bucket, prefix = split_uri(db_uri)
    return bucket, f"{prefix}/{SIDECAR}" if prefix else SIDECAR
