"""The Ray engine's last stage, run as Ray tasks: a block's rows written as Lance data
files by lance-ray's `LanceFragmentWriter`, into the collection's own folder or bucket.

Nothing written here is visible yet: the task returns one row holding the fragments'
metadata and the outcome of every document of the block, and the driver commits the
fragments (`rag/store/fragments.py`) before it records the documents in the manifest.
One output row per block, so a block's documents and their fragments always arrive
together, or (a worker lost) not at all."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from localgpt_cli.errors import InvalidInput

if TYPE_CHECKING:
    import pyarrow as pa

    from localgpt_cli.rag.store.fragments import Target


def write_block(batch: pa.Table, target: Target) -> pa.Table:
    """Write the rows of the block's documents; one row: fragments, documents, stats."""
    import pyarrow as pa

    rows = batch.to_pylist()
    docs = []
    for row in rows:
        info = orjson.loads(row["info"])
        info["document_id"] = row["document_id"]
        docs.append(info)
    fragments: list[bytes] = []
    written = [r for r, d in zip(rows, docs, strict=True) if r["chunks"] and d["outcome"] == "ok"]
    if written:
        try:
            fragments = _write(_rows_table(written, target), target)
        except InvalidInput as exc:  # vectors of another dimension than the table's
            for doc in docs:
                if doc["outcome"] == "ok" and doc.get("chunks"):
                    doc.update(outcome="failed", code=exc.code, message=exc.message)
    stats = [orjson.loads(r["stats"]) for r in rows if r["stats"]]
    return pa.table(
        {
            "fragments": pa.array([fragments], pa.list_(pa.binary())),
            "docs": [orjson.dumps(docs).decode()],
            "stats": [orjson.dumps(stats).decode()],
        }
    )


def _write(table: pa.Table, target: Target) -> list[bytes]:
    from lance_ray import LanceFragmentWriter

    writer = LanceFragmentWriter(
        target.uri,
        schema=target.schema,
        storage_options=target.storage_options or None,
        data_storage_version=target.storage_version,
        use_legacy_format=None,
    )
    return list(writer(table)["fragment"].to_pylist())


def _rows_table(rows: list[dict[str, Any]], target: Target) -> pa.Table:
    """The table rows of these documents, in the table's schema and column order."""
    import numpy as np
    import pyarrow as pa

    from localgpt_cli.rag.store.rows import vector_array

    columns: dict[str, list[Any]] = {}
    vectors: list[Any] = []
    for row in rows:
        payload = orjson.loads(row["chunks"])
        for name, values in payload["columns"].items():
            columns.setdefault(name, []).extend(values)
        count = len(payload["bodies"])
        info = orjson.loads(row["info"])
        if row["vectors"] is None:
            vectors.extend([None] * count)
            continue
        flat = np.frombuffer(row["vectors"], dtype=np.float32).reshape(count, info["dim"])
        missing = set(info.get("missing", ()))
        vectors.extend(None if i in missing else flat[i] for i in range(count))
    arrays = []
    for field in target.schema:
        if field.name == "vector":
            arrays.append(vector_array(np, pa, vectors, field.type.list_size))
        else:
            arrays.append(pa.array(columns[field.name], type=field.type))
    return pa.Table.from_arrays(arrays, schema=target.schema)
