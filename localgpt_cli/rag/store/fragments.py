"""Rows written elsewhere (Ray workers, through lance-ray) made part of a collection.

The Ray engine's workers write Lance data files straight into the table's folder or bucket
and hand back their fragment metadata; nothing is visible until the driver commits those
fragments here. One commit (a Lance `Update`) both adds the new fragments and deletes the
old rows of the documents they replace, so, as with `Writes.write_documents`, a crash
leaves each document either old or new, never both or neither. Files of fragments never
committed (a run stopped, a worker lost) are unreferenced: no reader sees them, and
LanceDB's cleanup removes them.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from localgpt_cli.rag.store import remote
from localgpt_cli.rag.store.rows import where_documents

if TYPE_CHECKING:
    import pyarrow as pa

    from localgpt_cli.rag.store.collection import Collection


@dataclass(frozen=True)
class Target:
    """Where and how a worker writes a collection's data files (picklable, sent to every
    worker): the Lance dataset's URI, its storage options, the table schema (the vector
    column's dimension included) and the data storage version of its files."""

    uri: str
    storage_options: dict[str, str]
    schema: pa.Schema
    storage_version: str


def prepare(coll: Collection, dim: int | None) -> Target:
    """Make the table ready for rows written by workers (the vector column of `dim`, the
    title and OCR confidence columns — any worker may read a page by OCR —, each a
    schema-only commit if missing), and say where they go."""
    if dim is not None:
        coll._ensure_vector_column(dim)
    coll._ensure_title_column({})
    coll._ensure_ocr_column()
    dataset = _dataset(coll)
    return Target(
        uri=dataset.uri,
        storage_options=remote.storage_options(coll.uri),
        schema=coll.schema,
        storage_version=str(dataset.data_storage_version),
    )


def commit(
    coll: Collection, fragments: Sequence[bytes], replaced: Sequence[str], pending: bool
) -> None:
    """Commit the workers' `fragments` (pickled Lance fragment metadata) and delete the old
    rows of the `replaced` documents, in one commit. `pending`: some new rows have no
    vector, which the collection's mark must say before they are visible."""
    import lance

    if pending:
        coll.mark_pending(True)
    dataset = _dataset(coll)
    removed: list[int] = []
    updated: list[Any] = []
    if replaced:
        where = where_documents(replaced)
        for fragment in dataset.get_fragments():
            changed = fragment.delete(where)  # writes a deletion file, commits nothing
            if changed is None:
                removed.append(fragment.fragment_id)
            elif changed != fragment.metadata:
                updated.append(changed)
    new = [pickle.loads(f) for f in fragments]  # noqa: S301 (our own workers' output)
    if not (new or removed or updated):
        return
    operation = lance.LanceOperation.Update(
        removed_fragment_ids=removed, updated_fragments=updated, new_fragments=new
    )
    lance.LanceDataset.commit(
        dataset.uri,
        operation,
        read_version=dataset.version,
        storage_options=remote.storage_options(coll.uri) or None,
    )
    coll.table.checkout_latest()
    coll._changed()


def _dataset(coll: Collection) -> Any:
    """The collection's table as a Lance dataset, at its latest version."""
    import lance

    uri = f"{coll.uri.rstrip('/')}/{coll.name}.lance"
    return lance.dataset(uri, storage_options=remote.storage_options(coll.uri) or None)
