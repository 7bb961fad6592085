"""A collection's manifest and its lock, taken together: what every writer of a store holds.

The lock (lock.py) and the manifests (manifest.py) live beside the store they protect and
describe (sidecar.py); a writer takes the lock, then moves a manifest left in its home by
an earlier version into the store, then reads the manifest. `locked()` does those three in
that order, so no command can forget one of them.

Removing documents changes both the manifest and the table, and the order matters: the
manifest first (see `Library.remove`). It is written once, here, for every command that
removes documents (`docs rm`, and ingest's re-index with another embedding model).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from localgpt_cli.rag import manifest as mf


def _unlocked() -> None:
    """The write check of a library opened without the lock (a dry run writes nothing)."""


class Library:
    """One collection's manifest, opened once, and the check a writer calls before each
    write (a lease can be lost while it is held; see lock.ingest_lock)."""

    def __init__(
        self,
        db_uri: str,
        home: Path,
        collection: str,
        check_lock: Callable[[], None] = _unlocked,
    ) -> None:
        self.db_uri = db_uri
        self.home = home  # where a manifest from before the sidecar may still be
        self.collection = collection
        self.check_lock = check_lock
        self._manifest: mf.Manifest | None = None

    @property
    def manifest(self) -> mf.Manifest:
        """The collection's manifest, read on first use."""
        if self._manifest is None:
            self._manifest = mf.open_manifest(self.db_uri, self.home, self.collection)
        return self._manifest

    def remove(self, document_ids: Iterable[str] | None, delete_rows: Callable[[], object]) -> None:
        """Forget documents in the manifest (every one of the collection's when
        `document_ids` is None), then delete their rows with `delete_rows`.

        Manifest first: a crash between the two leaves rows the manifest does not vouch
        for, which the next ingest re-checks (the file is processed again, or pruned),
        never the reverse: a manifest vouching for rows that are gone would make the next
        ingest trust them and skip the file.
        """
        self.check_lock()
        if document_ids is None:
            mf.manifest_file(self.db_uri, self.home, self.collection).remove()
            self._manifest = None
        else:
            manifest = self.manifest
            entries = manifest.ids()
            for doc_id in document_ids:
                entry = entries.get(doc_id)
                if entry is not None:
                    manifest.remove(entry.path)
            manifest.compact()
        delete_rows()


@contextlib.contextmanager
def locked(db_uri: str, home: Path, collection: str, wait: float = 0.0) -> Iterator[Library]:
    """Hold the store's ingest lock (waiting up to `wait` seconds; LockBusy, exit 75, if
    another run holds it), move this home's old manifest into the store, and yield the
    collection's library."""
    from localgpt_cli.rag.lock import ingest_lock

    with ingest_lock(db_uri, home, wait) as check:
        mf.migrate(db_uri, home, collection)
        yield Library(db_uri, home, collection, check)
