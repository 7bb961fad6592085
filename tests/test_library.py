"""rag/library.py: the manifest and the lock taken together, and the manifest-first rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from localgpt_cli.errors import LockBusy
from localgpt_cli.rag.library import locked
from localgpt_cli.rag.manifest import OK, Entry, open_manifest


def _entry(path: str, document_id: str) -> Entry:
    return Entry(
        path=path, document_id=document_id, size=1, mtime_ns=1, sha256="0" * 64,
        type="text", chunks=1, status=OK, options="800/120/titled", ingested_at="now",
    )  # fmt: skip


@pytest.fixture
def where(tmp_path: Path) -> tuple[str, Path]:
    db, home = tmp_path / "db", tmp_path / "home"
    with locked(str(db), home, "default") as library:
        library.manifest.put(_entry("/notes/a.md", "A"))
        library.manifest.put(_entry("/notes/b.md", "B"))
        library.manifest.compact()
    return str(db), home


def test_removed_documents_leave_the_manifest_before_their_rows_are_deleted(where):
    db, home = where
    vouched: list[set[str]] = []
    with locked(db, home, "default") as library:
        library.remove(["A"], lambda: vouched.append(set(open_manifest(db, home, "default").ids())))
    assert vouched == [{"B"}]  # on disk when the rows go: a crash then leaves only rows


def test_removing_every_document_drops_the_manifest_before_the_table(where):
    db, home = where
    vouched: list[set[str]] = []
    with locked(db, home, "default") as library:
        library.remove(None, lambda: vouched.append(set(open_manifest(db, home, "default").ids())))
        assert library.manifest.entries == {}  # read again, after the removal
    assert vouched == [set()]


def test_the_library_is_held_under_the_stores_lock(where):
    db, home = where
    with locked(db, home, "default"), pytest.raises(LockBusy), locked(db, home, "default"):
        pass
