"""The ingest manifest: what each file looked like when it was last ingested.

It is what lets an unchanged file cost one `stat`: (size, mtime) equal to the entry's means
unchanged; otherwise the sha256 decides (a `touch` is not a change, and the same content
under a new path is a move). Failed and skipped files are recorded too, so `docs list`
can show them and a binary file is not sniffed again.

It lives with the store it describes (`<store>/_localgpt/manifests/<collection>.jsonl`, an
object of the same name for `s3://`; see sidecar.py), so two homes sharing a store share
it; a manifest left in a home by an earlier version is merged into it on first use.

On a local path it is a journal (JSON lines): a header, then one line per change,
appended after the table commit it describes and replayed in order on load; the end of a
run rewrites it compactly (temp file + rename). An object cannot be appended to, so
there it is rewritten whole, at most every OBJECT_SAVE_SECONDS and at the end of the run:
lagging is safe, for the reason below. The table is always
written first, so after a crash at any moment the manifest can only lag behind the table,
never run ahead of it; the next run re-checks what it lags on (a file that does not match
its entry is processed again, and its vectors come back from the embedding cache), and
that is how a killed run converges. A torn last line is ignored for the same reason.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Protocol

from localgpt_cli.rag import sidecar

FORMAT = 1
# How often an object-store manifest is rewritten during a run (it is also at the end).
OBJECT_SAVE_SECONDS = 30.0

OK = "ok"
FAILED = "failed"
SKIPPED = "skipped"  # binary: not a document, remembered so it costs a stat next time
# Why a picture was skipped when that may pass (Entry.skip): it is read, unchanged, once
# OCR is on again (`--ocr never` then) or Tesseract is installed. A file skipped for what
# it is (binary, damaged, no text) has none, and stays skipped while it is unchanged.
OCR_OFF = "ocr_off"
OCR_UNAVAILABLE = "ocr_unavailable"


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
    skip: str | None = None  # OCR_OFF or OCR_UNAVAILABLE: why a skipped picture was unread


_ENTRY_FIELDS = {f.name for f in fields(Entry)}


def home_manifest_path(home: Path, db_uri: str, collection: str) -> Path:
    """Where versions before the sidecar kept the manifest: in the home, one per
    (database, collection)."""
    where = db_uri if "://" in db_uri else os.path.abspath(db_uri)
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    return home / "manifests" / f"{collection}-{digest}.jsonl"


class ManifestFile(Protocol):
    """Where a manifest's bytes are kept."""

    appendable: bool

    def read(self) -> bytes | None: ...
    def append(self, header: bytes, data: bytes) -> None: ...
    def replace(self, data: bytes) -> None: ...
    def remove(self) -> None: ...


class LocalFile:
    """A manifest file on a local path: appended to, replaced by rename."""

    appendable = True

    def __init__(self, path: Path):
        self.path = path

    def __str__(self) -> str:
        return str(self.path)

    def read(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None

    def append(self, header: bytes, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "ab") as fh:
            if fh.tell() == 0:
                fh.write(header)
            elif not _ends_with_newline(self.path):
                fh.write(b"\n")  # keep a torn line from swallowing the next one
            fh.write(data)

    def replace(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


class ObjectFile:
    """A manifest object in an S3 bucket: written whole (one PUT is atomic), and only over
    the version this process last read or wrote (a conditional put), so a run that lost
    its lease cannot overwrite the manifest of the run that took it over."""

    appendable = False

    def __init__(self, bucket: str, key: str, where: str | None = None):
        self.bucket = bucket
        self.key = key
        self.where = where  # the store's URI, which its errors name
        self._client: Any = None
        self._etag: str | None = None  # of the version last read or written
        self._read = False

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    @property
    def client(self) -> Any:
        if self._client is None:
            from localgpt_cli.rag.s3 import S3Client

            self._client = S3Client.from_env(self.bucket, where=self.where)
        return self._client

    def read(self) -> bytes | None:
        found = self.client.get(self.key)
        self._etag, self._read = (found.etag if found else None), True
        return None if found is None else bytes(found.body)

    def append(self, header: bytes, data: bytes) -> None:
        raise NotImplementedError("an object is rewritten whole")

    def replace(self, data: bytes) -> None:
        from localgpt_cli.rag.lease import LeaseLost
        from localgpt_cli.rag.s3 import PreconditionFailed

        try:
            self._etag = self.client.put(
                self.key,
                data,
                if_none_match=self._read and self._etag is None,
                if_match=self._etag,
            )
        except PreconditionFailed:
            raise LeaseLost(
                f"The manifest {self} was changed by another run while this one wrote the "
                "store: this run's lease must have lapsed.",
                hint="What was committed is kept; run again.",
            ) from None
        self._read = True

    def remove(self) -> None:
        self.client.delete(self.key)
        self._etag, self._read = None, True


def manifest_file(db_uri: str, home: Path, collection: str) -> ManifestFile:
    """The manifest of `collection` in the store at `db_uri`, beside its tables."""
    name = f"manifests/{collection}.jsonl"
    local = sidecar.local_dir(db_uri)
    if local is not None:
        return LocalFile(local / name)
    s3 = sidecar.s3_location(db_uri)
    if s3 is not None:
        return ObjectFile(s3[0], f"{s3[1]}/{name}", db_uri)
    return LocalFile(home_manifest_path(home, db_uri, collection))


def open_manifest(db_uri: str, home: Path, collection: str) -> Manifest:
    """The collection's manifest, with what this home's old manifest knows that the
    store's does not yet (read only: `migrate` moves it, under the ingest lock)."""
    manifest = Manifest.load(manifest_file(db_uri, home, collection), db_uri, collection)
    old = home_manifest_path(home, db_uri, collection)
    if str(old) != str(manifest.file) and old.exists():
        legacy = Manifest.load(LocalFile(old), db_uri, collection)
        for path, entry in legacy.entries.items():
            manifest.entries.setdefault(path, entry)
    return manifest


def migrate(db_uri: str, home: Path, collection: str) -> None:
    """Move this home's old manifest of the store into the store (call under the ingest
    lock). Merged, not copied over: another home may have migrated its own already; an
    entry the store's manifest has wins. The old file goes only once the merge is saved."""
    old = home_manifest_path(home, db_uri, collection)
    target = manifest_file(db_uri, home, collection)
    if str(old) == str(target) or not old.exists():
        return
    manifest = open_manifest(db_uri, home, collection)
    manifest.save()
    old.unlink()


class Manifest:
    """The entries of one collection, keyed by absolute path."""

    def __init__(self, file: ManifestFile, db_uri: str, collection: str):
        self.file = file
        self.db_uri = db_uri
        self.collection = collection
        self.entries: dict[str, Entry] = {}
        self._journal: list[bytes] = []
        self._lines = 0
        self._saved_at = time.monotonic()

    @classmethod
    def load(cls, file: ManifestFile, db_uri: str, collection: str) -> Manifest:
        import orjson

        manifest = cls(file, db_uri, collection)
        data = file.read()
        if data is None:
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
        self._note(_put(entry))

    def remove(self, path: str) -> None:
        if self.entries.pop(path, None) is not None:
            self._note({"op": "del", "path": path})

    def _note(self, obj: dict[str, Any]) -> None:
        import orjson

        self._journal.append(orjson.dumps(obj) + b"\n")

    def flush(self) -> None:
        """Save the changes noted since the last flush (after their table commit):
        appended to a local journal; an object is rewritten only every
        OBJECT_SAVE_SECONDS."""
        if not self._journal:
            return
        if not self.file.appendable:
            if time.monotonic() - self._saved_at >= OBJECT_SAVE_SECONDS:
                self.save()
            return
        self.file.append(self._header(), b"".join(self._journal))
        self._lines += len(self._journal)
        self._journal.clear()

    def compact(self) -> None:
        """Rewrite the journal as one line per entry, atomically (if it is not already)."""
        if self._journal and self.file.appendable:
            self.flush()
        if self._journal or self._lines > len(self.entries):
            self.save()

    def save(self) -> None:
        """Write every entry, one line each, replacing what the file held."""
        import orjson

        lines = [orjson.dumps(_put(e)) + b"\n" for e in self.entries.values()]
        self.file.replace(self._header() + b"".join(lines))
        self._lines = len(self.entries)
        self._journal.clear()
        self._saved_at = time.monotonic()

    def _header(self) -> bytes:
        import orjson

        return (
            orjson.dumps(
                {"op": "header", "format": FORMAT, "db": self.db_uri, "collection": self.collection}
            )
            + b"\n"
        )


def _put(entry: Entry) -> dict[str, Any]:
    """An entry's journal line; `skip` only when set, so the lines of every other entry
    are what versions before it wrote (and an older version ignores the field)."""
    line = {"op": "put", **vars(entry)}  # its fields are flat: no asdict's deep copy
    if line["skip"] is None:
        del line["skip"]
    return line


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"
