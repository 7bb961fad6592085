"""The ingest manifest: what each file looked like when it was last ingested.

It is what lets an unchanged file cost one `stat`: (size, mtime) equal to the entry's means
unchanged; otherwise the sha256 decides (a `touch` is not a change, and the same content
under a new path is a move). Failed and skipped files are recorded too, so `docs list`
can show them and a binary file is not sniffed again.

On disk it is a journal (JSON lines under $LOCALGPT_HOME/manifests/): a header, then one
line per change, appended after the table commit it describes and replayed in order on
load; the end of a run rewrites it compactly (temp file + rename). The table is always
written first, so after a crash at any moment the manifest can only lag behind the table,
never run ahead of it; the next run re-checks what it lags on (a file that does not match
its entry is processed again, and its vectors come back from the embedding cache), and
that is how a killed run converges. A torn last line is ignored for the same reason.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

FORMAT = 1

OK = "ok"
FAILED = "failed"
SKIPPED = "skipped"  # binary: not a document, remembered so it costs a stat next time


@dataclass
class Entry:
    """One file as last seen by ingest."""

    path: str
    document_id: str
    size: int
    mtime_ns: int
    sha256: str
    type: str | None
    chunks: int
    status: str
    options: str  # the chunking it was cut with; different options mean re-chunking
    ingested_at: str
    error: str | None = None  # "code: message" when status is failed


_ENTRY_FIELDS = {f.name for f in fields(Entry)}


def manifest_path(home: Path, db_uri: str, collection: str) -> Path:
    """One manifest per (database, collection): two `--db` values never share one."""
    where = db_uri if "://" in db_uri else os.path.abspath(db_uri)
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    return home / "manifests" / f"{collection}-{digest}.jsonl"


class Manifest:
    """The entries of one collection, keyed by absolute path."""

    def __init__(self, path: Path, db_uri: str, collection: str):
        self.path = path
        self.db_uri = db_uri
        self.collection = collection
        self.entries: dict[str, Entry] = {}
        self._journal: list[bytes] = []
        self._lines = 0

    @classmethod
    def load(cls, path: Path, db_uri: str, collection: str) -> Manifest:
        import orjson

        manifest = cls(path, db_uri, collection)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return manifest
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a line torn by a crash: its change is re-checked by this run
            op = obj.get("op")
            if op in ("put", "del"):
                manifest._lines += 1
            if op == "put":
                entry = Entry(**{k: v for k, v in obj.items() if k in _ENTRY_FIELDS})
                manifest.entries[entry.path] = entry
            elif op == "del":
                manifest.entries.pop(obj.get("path"), None)
        return manifest

    def get(self, path: str) -> Entry | None:
        return self.entries.get(path)

    def ids(self) -> dict[str, Entry]:
        return {e.document_id: e for e in self.entries.values()}

    def put(self, entry: Entry) -> None:
        self.entries[entry.path] = entry
        self._note({"op": "put", **asdict(entry)})

    def remove(self, path: str) -> None:
        if self.entries.pop(path, None) is not None:
            self._note({"op": "del", "path": path})

    def _note(self, obj: dict[str, Any]) -> None:
        import orjson

        self._journal.append(orjson.dumps(obj) + b"\n")

    def flush(self) -> None:
        """Append the changes noted since the last flush (after their table commit)."""
        if not self._journal:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as fh:
            if fh.tell() == 0:
                fh.write(self._header())
            elif not _ends_with_newline(self.path):
                fh.write(b"\n")  # keep a torn line from swallowing the next one
            fh.write(b"".join(self._journal))
        self._lines += len(self._journal)
        self._journal.clear()

    def compact(self) -> None:
        """Rewrite the journal as one line per entry, atomically."""
        import orjson

        self.flush()
        if self._lines <= len(self.entries):
            return
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            fh.write(self._header())
            for entry in self.entries.values():
                fh.write(orjson.dumps({"op": "put", **asdict(entry)}) + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._lines = len(self.entries)

    def _header(self) -> bytes:
        import orjson

        return (
            orjson.dumps(
                {"op": "header", "format": FORMAT, "db": self.db_uri, "collection": self.collection}
            )
            + b"\n"
        )


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"
