"""The ingest pipeline: walk -> compare with the manifest -> parse -> chunk -> embed -> store.

`Ingest.run()` is a generator of plain-dict events, so the CLI (or a test) renders them as
it likes and the pipeline imports nothing that draws:
- `plan`: how many files were found and how many must be (re)processed;
- `progress`: one file processed (`files`, `chunks` increments), or a phase name;
- `warning`: something a person should know (not UTF-8, embed input cut, Ollama down);
- `document`: one file that changed or failed, after its rows were committed
  (the PROTOCOL record);
- `summary`: the last event (the PROTOCOL record).

Memory stays bounded whatever the corpus: one document is parsed at a time, and chunks
wait in memory only until the next commit (`commit_rows`). Small documents are committed
together because a LanceDB commit costs tens of milliseconds; a group commit is atomic, so
a crash still leaves each document either old or new. The manifest is written after the
commit it describes (see manifest.py for why that order makes a killed run converge).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import InvalidInput, LocalGPTError
from localgpt_cli.rag import manifest as mf
from localgpt_cli.rag.chunk import DEFAULT_MAX_CHUNKS, resolve_limits
from localgpt_cli.rag.library import Library, locked
from localgpt_cli.rag.titles import embed_body
from localgpt_cli.rag.walk import FoundFile, under, walk

if TYPE_CHECKING:
    from localgpt_cli.llm.client import OllamaClient
    from localgpt_cli.rag.embedding import EmbedQueue
    from localgpt_cli.rag.store import Collection, DocumentSummary, Store
    from localgpt_cli.rag.types import Chunk

DEFAULT_MAX_FILE_SIZE = 20_000_000
DEFAULT_BATCH_SIZE = 64
# Rows gathered before a commit: large enough that commits do not dominate a run over many
# small files, small enough that a few MB of text and vectors are all that wait in memory.
COMMIT_ROWS = 2000
# ...and at least this often (seconds), so a run killed while a slow CPU embeds thousands of
# chunks loses at most this much work; a commit costs ~30-60 ms, a few percent of it.
COMMIT_SECONDS = 1.0
# Pending chunks (stored while Ollama was down) fetched and filled per commit.
PENDING_ROWS = 1024
HASH_BLOCK = 1 << 20
# Names the way chunks are turned into embedding inputs (rag/titles.py); part of each
# manifest entry's options, so changing it makes the next run re-process every document.
EMBED_RECIPE = "titled"

Event = dict[str, Any]


@dataclass
class IngestOptions:
    """What `localgpt ingest` was asked to do."""

    paths: Sequence[str]
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    prune: bool = False
    force: bool = False
    dry_run: bool = False
    batch_size: int = DEFAULT_BATCH_SIZE
    chunk_size: int | None = None
    chunk_overlap: int | None = None
    max_file_size: int = DEFAULT_MAX_FILE_SIZE
    max_chunks: int = DEFAULT_MAX_CHUNKS
    commit_rows: int = COMMIT_ROWS
    commit_seconds: float = COMMIT_SECONDS


@dataclass
class Summary:
    """Counts of one run; `record()` is the PROTOCOL `summary` record."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    moved: int = 0
    removed: int = 0
    failed: int = 0
    skipped: int = 0
    pending_embeddings: int = 0
    chunks: int = 0
    embedded: int = 0
    reused: int = 0
    embed_requests: int = 0
    bytes: int = 0
    dry_run: bool = False
    ms: int = 0
    embed_ms: int = 0  # waiting for the embedding server
    optimize_ms: int = 0  # compaction and index upkeep at the end

    def record(self) -> Event:
        return {
            "type": "summary",
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "failed": self.failed,
            "pending_embeddings": self.pending_embeddings,
            "ms": self.ms,
            "moved": self.moved,
            "skipped": self.skipped,
            "chunks": self.chunks,
            "embedded": self.embedded,
            "reused": self.reused,
            "embed_requests": self.embed_requests,
            "bytes": self.bytes,
            "dry_run": self.dry_run,
            "embed_ms": self.embed_ms,
            "optimize_ms": self.optimize_ms,
        }


@dataclass
class _Work:
    """A file that must be (re)processed, and why."""

    found: FoundFile
    sha256: str
    entry: mf.Entry | None  # its manifest entry, if any
    # (document id, chunk hashes in order) of rows stored at this path that no manifest
    # entry vouches for (the manifest was lost, or a run was killed before writing it)
    stored: tuple[str, list[str]] | None = None


class _Doc:
    """A processed document waiting for its embeddings and its commit."""

    def __init__(self, document_id: str, chunks: list[Chunk], hashes: list[str]) -> None:
        self.document_id = document_id
        self.chunks = chunks
        self.hashes = hashes
        self.vectors: list[Any] = [None] * len(chunks)
        self.waiting = 0  # chunks whose vector is still queued
        self.stored = False  # rows of this document are in the table (merge, not append)
        self.entry: mf.Entry | None = None
        self.record: Event = {}

    def deliver(self, index: int, vector: Any) -> None:
        self.vectors[index] = vector
        self.waiting -= 1


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def file_sha256(path: str, limit: int) -> str:
    """The sha256 of the file's first `limit + 1` bytes: all of it when it is within the
    size limit; a file that grew past the limit fails as too large when parsed, so
    hashing the rest (a log growing while read) would only make the run never end."""
    h = hashlib.sha256()
    left = limit + 1
    with open(path, "rb") as fh:
        while left > 0 and (block := fh.read(min(HASH_BLOCK, left))):
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def document_id_for(path: str, taken: set[str]) -> str:
    """A new document's id: derived from its path, so the same corpus ingested twice (or a
    run killed and run again) gets the same ids; salted if a document that moved away from
    this path still uses it."""
    salt = 0
    while True:
        key = path if salt == 0 else f"{path}\0{salt}"
        doc_id = hashlib.sha256(key.encode()).hexdigest()[:16]
        if doc_id not in taken:
            return doc_id
        salt += 1


class Ingest:
    """One ingest run over one collection."""

    def __init__(
        self,
        options: IngestOptions,
        *,
        store: Store,
        collection: str,
        model: str,
        model_explicit: bool,
        client: OllamaClient,
        home: Path,
        wait_lock: float = 0.0,
    ) -> None:
        self.opts = options
        self.store = store
        self.name = collection
        self.model = model
        self.model_explicit = model_explicit
        self.client = client
        self.home = home  # where a manifest from before the sidecar may still be
        self.wait_lock = wait_lock
        self.summary = Summary(dry_run=options.dry_run)
        self.down: LocalGPTError | None = None  # why embeddings could not be made
        self.coll: Collection | None = None
        self.manifest: mf.Manifest
        self.queue: EmbedQueue
        self._table_ids: set[str] | None = None
        self._wrote = False
        self._pending_at_start = 0
        self._pending_drained = False
        self._pending_written = 0  # rows this run stored without a vector
        self.roots: list[str] = []  # what this run named: the only place it may prune
        self._unnameable: list[FoundFile] = []  # names that are not UTF-8: they fail alone
        self._sniffed: list[FoundFile] = []  # new files found binary: skipped
        self.library: Library

    # -- the run ------------------------------------------------------------------------

    def run(self) -> Iterator[Event]:
        """Do the run, yielding events; the last one is the summary."""
        start = time.perf_counter()
        if self.opts.dry_run:
            self.library = Library(self.store.uri, self.home, self.name)
            yield from self._run()
        else:
            with locked(self.store.uri, self.home, self.name, self.wait_lock) as self.library:
                yield from self._run()
        self.summary.ms = _ms(start)
        yield self.summary.record()

    def _run(self) -> Iterator[Event]:
        from localgpt_cli.llm.client import EmbedStats
        from localgpt_cli.rag.embedding import EmbedQueue

        walked = walk(self.opts.paths, self.opts.include, self.opts.exclude)
        self.roots, files = walked.roots, walked.files
        for path in walked.irregular:
            message = f"{path}: skipped: not a regular file"
            yield {"type": "warning", "code": "not_regular_file", "message": message}
            yield self._skipped(path, "not_regular_file", message)
        yield from self._open_collection(files)
        self.manifest = self.library.manifest
        self.stats = EmbedStats()
        self.queue = EmbedQueue(
            self.client, self.model, self.coll, batch_size=self.opts.batch_size, stats=self.stats
        )
        if self.coll is not None:
            yield from self._embed_pending()
        work, moves, gone = self._classify(files)
        yield {
            "type": "plan",
            "files": len(files),
            "to_process": len(work),
            "bytes": sum(w.found.size for w in work),
            "moves": len(moves),
        }
        for f in self._unnameable:
            yield self._bad_name(f)
        for f in self._sniffed:
            yield self._skipped(f.path, "binary_file", f"{f.path}: binary file; skipped")
        for new, old in moves:
            yield self._move(new, old)
        yield from self._process(work)
        if self.opts.prune:
            yield from self._prune(gone)
        # Counted (and the collection's pending mark set) before the optimize, whose index
        # checks count the rows with vectors: cheap once the mark says none are missing.
        self.summary.pending_embeddings = self._pending_count()
        self.queue.forget()
        if not self.opts.dry_run:
            self.manifest.compact()
            repair = self._index_repair()
            if repair:
                yield {"type": "warning", "code": "index_repair", "message": repair}
            if self.coll is not None and (self._wrote or repair):
                # Once per run, not per commit: optimizing every 100k rows was measured
                # slower (47 s vs 18 s at 200 MB) and no lighter (peak RSS 651 vs 508 MB).
                yield {"type": "progress", "phase": "optimizing"}
                started = time.perf_counter()
                self.coll.optimize()
                self.summary.optimize_ms = _ms(started)
        self.summary.embed_requests = self.stats.requests
        self.summary.embed_ms = round(self.stats.seconds * 1000)
        self.summary.embedded = self.queue.embedded

    def _index_repair(self) -> str | None:
        """Why a run that changed nothing must still optimize: an earlier run was killed
        before its final optimize, leaving rows unindexed or no full-text index, which
        nothing else would ever fix (see store.IndexHealth)."""
        if self._wrote or self.coll is None:
            return None
        problem = self.coll.index_health().problem()
        if problem is None:
            return None
        return (
            f"Collection {self.name!r} had {problem} (an earlier run was interrupted): "
            "rebuilding the indexes."
        )

    # -- collection and model -------------------------------------------------------------

    def _open_collection(self, files: list[FoundFile]) -> Iterator[Event]:
        exists = self._collection_exists()
        if self.opts.dry_run:
            self.coll = self.store.collection(self.name) if exists else None
            if self.coll is not None:
                self._adopt_or_check_model()
            return
        if exists:
            self.coll = self.store.collection(self.name)
            if self._adopt_or_check_model():
                vanished = self._reindex_losses(files)
                yield {
                    "type": "warning",
                    "code": "reindex",
                    "message": f"Collection {self.name!r} was embedded with "
                    f"{self.coll.model}; --force re-indexes it with {self.model}: its "
                    f"documents are removed and the paths given are ingested again.",
                }
                self.library.remove(None, lambda: self.store.drop_collection(self.name))
                self.coll = None
                for doc in vanished:
                    yield self._count({
                        "type": "document", "status": "removed", "path": doc.path,
                        "document_id": doc.document_id, "chunks": doc.chunks,
                    })  # fmt: skip
        if self.coll is None:
            self.coll = self.store.collection(self.name, create=True)
        # The model is recorded with the first rows (see _commit), not here: a run that
        # fails before storing anything (a model that is not pulled) must not pin it.

    def _reindex_losses(self, files: list[FoundFile]) -> list[DocumentSummary]:
        """The documents a re-index drops for good: those whose file is gone. Refuses
        (nothing changed) when it would also drop documents whose files exist but were
        not named in this run: `--force` re-embeds what was named, nothing else."""
        assert self.coll is not None
        named = {f.path for f in files}
        stored = [d for d in self.coll.documents() if d.path not in named]
        kept = [d for d in stored if os.path.exists(d.path)]
        if kept:
            raise InvalidInput(
                f"Re-indexing collection {self.name!r} with {self.model} replaces all of its "
                f"documents, and {len(kept)} of them are not among the paths given "
                f"(e.g. {kept[0].path}).",
                hint="Nothing was changed. Name every file or folder the collection holds "
                f"(localgpt docs list -C {self.name} shows them), or use another collection "
                f"for {self.model} with -C NAME.",
            )
        return stored

    def _collection_exists(self) -> bool:
        uri = self.store.uri
        if "://" not in uri and not os.path.isdir(uri):
            return False  # do not let a dry run create the database folder
        return self.store.exists(self.name)

    def _adopt_or_check_model(self) -> bool:
        """Use the collection's model unless one was asked for; True if --force must
        re-index because the one asked for differs."""
        assert self.coll is not None
        have = self.coll.model
        if have is None or have == self.model:
            return False
        if not self.model_explicit:
            self.model = have
            return False
        if self.opts.force and not self.opts.dry_run:
            return True
        self.coll.check_model(self.model)  # raises, with the command to re-index
        return False

    # -- pending embeddings ---------------------------------------------------------------

    def _count_pending(self) -> int:
        coll = self.coll
        assert coll is not None
        return coll.count("vector IS NULL") if coll.has_vector_column() else coll.count()

    def _pending_count(self) -> int:
        """Chunks left without a vector at the end of the run.

        Counting reads the whole vector column, so it is done only when rows may be pending
        (some were left from before, or this run stored some), and the collection's pending
        mark is updated with the answer so that the next run can skip the count."""
        coll = self.coll
        if coll is None:
            return 0
        if self.opts.dry_run:
            return self._pending_at_start
        left_over = self._pending_at_start and not self._pending_drained
        if not (left_over or self._pending_written):
            if self._wrote or self._pending_at_start:
                coll.mark_pending(False)  # a no-op when already marked
            return 0
        pending = self._count_pending()
        coll.mark_pending(pending > 0)
        return pending

    def _embed_pending(self) -> Iterator[Event]:
        """Embed chunks an earlier run stored without vectors, before anything new."""
        coll = self.coll
        assert coll is not None
        if coll.pending_marked() is False:
            return
        self._pending_at_start = self._count_pending()
        if self.opts.dry_run:
            return
        if not self._pending_at_start:
            if coll.count():
                coll.mark_pending(False)  # a collection from before the mark existed
            return
        yield {"type": "progress", "phase": "pending", "chunks_total": self._pending_at_start}
        while self.down is None:
            rows = coll.pending(limit=PENDING_ROWS)
            if not rows:
                self._pending_drained = True
                break
            cached = self.queue.cached([r.text_hash for r in rows])
            done = [(r.chunk_id, cached[r.text_hash]) for r in rows if r.text_hash in cached]
            self.summary.reused += len(done)
            for r in rows:
                if r.text_hash not in cached:  # the same input as when it was stored
                    self.queue.put(embed_body(r.title, r.text), r.text_hash, r.chunk_id)
            delivered = self.queue.drain(everything=True)
            yield from self._check_down()
            done += [(ref, v) for ref, v in delivered if v is not None]
            if not done or coll.set_vectors([c for c, _ in done], [v for _, v in done]) == 0:
                break
            self._wrote = True
            yield {"type": "progress", "phase": "pending", "chunks": len(done)}

    def _check_down(self) -> Iterator[Event]:
        """Warn once, when the embedding server is first found unreachable."""
        if self.queue.down is not None and self.down is None:
            self.down = self.queue.down
            yield {
                "type": "warning",
                "code": "embeddings_pending",
                "message": f"{self.down} Chunks are stored without embeddings (keyword "
                "search finds them); the next ingest embeds them.",
            }

    # -- deciding what changed --------------------------------------------------------------

    def _options_key(self, doc_type: str | None) -> str:
        """What a document's rows depend on besides its bytes: chunk limits and the embed
        input recipe (`titled`: the title above each chunk). A manifest entry written with
        another key is processed again, so collections made before titles re-embed once."""
        if doc_type is None:
            return ""
        size, overlap = resolve_limits(doc_type, self.opts.chunk_size, self.opts.chunk_overlap)
        return f"{size}/{overlap}/{EMBED_RECIPE}"

    def _classify(
        self, files: list[FoundFile]
    ) -> tuple[list[_Work], list[tuple[_Work, mf.Entry]], list[mf.Entry]]:
        """(files to process, moves as (new file, old entry), entries whose file is gone)."""
        from localgpt_cli.rag.filetypes import detect_type, is_binary

        manifest = self.manifest
        seen = {f.path for f in files}
        maybe: list[tuple[FoundFile, mf.Entry | None]] = []
        for f in files:
            if not _utf8(f.path):
                self._unnameable.append(f)
                continue
            entry = manifest.get(f.path)
            if (
                entry is not None
                and not self.opts.force
                and entry.status != mf.FAILED
                and entry.size == f.size
                and entry.mtime_ns == f.mtime_ns
                and (entry.status == mf.SKIPPED or entry.options == self._options(f.path))
            ):
                self.summary.unchanged += 1
                continue
            maybe.append((f, entry))
        # Only files under the paths named in this run count as gone, to be pruned or taken
        # as the source of a move: elsewhere, a missing file may be an unmounted drive, or
        # (on a store shared by several machines) another machine's file.
        gone = [
            e
            for p, e in manifest.entries.items()
            if p not in seen and under(p, self.roots) and not os.path.exists(p)
        ]
        gone_by_sha = {e.sha256: e for e in gone if e.status == mf.OK}
        orphans = self._orphans() if any(entry is None for _, entry in maybe) else {}
        work: list[_Work] = []
        moves: list[tuple[_Work, mf.Entry]] = []
        for f, entry in maybe:
            try:
                sha = file_sha256(f.path, self.opts.max_file_size)
            except OSError:
                work.append(_Work(f, "", entry))  # processing reports it as failed
                continue
            if entry is None and f.path in orphans:  # stored, unknown to the manifest
                work.append(_Work(f, sha, None, orphans[f.path]))
                continue
            options = self._options(f.path)
            if (
                entry is not None
                and not self.opts.force
                and entry.sha256 == sha
                and (
                    entry.status == mf.SKIPPED
                    or (entry.status == mf.OK and entry.options == options)
                )
            ):
                # Touched, not changed: remember the new mtime so the next run skips it.
                self.summary.unchanged += 1
                if not self.opts.dry_run:
                    manifest.put(_restat(entry, f))
                continue
            if entry is None and is_binary(Path(f.path)):
                self._sniffed.append(f)
                if not self.opts.dry_run:
                    kind = detect_type(Path(f.path))
                    manifest.put(self._entry(f, sha, "", kind[0] if kind else None, 0, mf.SKIPPED))
                continue
            old = gone_by_sha.get(sha) if entry is None and not self.opts.force else None
            if old is not None and old.options == options:
                del gone_by_sha[sha]
                if old in gone:
                    gone.remove(old)
                moves.append((_Work(f, sha, None), old))
                continue
            work.append(_Work(f, sha, entry))
        return work, moves, gone

    def _orphans(self) -> dict[str, tuple[str, list[str]]]:
        """Stored documents no manifest entry vouches for, by path: (id, chunk hashes).

        The manifest is only a record of what the table holds, so when it is lost (or a run
        was killed between a commit and its manifest write) the rows themselves say whether
        a file is unchanged: the same chunk hashes in the same order. Comparing them costs
        a parse and no embedding; re-ingesting everything took 82.7 s where 5.8 s did."""
        unknown = self._stored_ids() - self.manifest.ids().keys()
        if not unknown:
            return {}
        assert self.coll is not None
        stored = self.coll.document_hashes(unknown)
        return {path: (doc_id, hashes) for doc_id, (path, hashes) in stored.items()}

    def _options(self, path: str) -> str:
        from localgpt_cli.rag.filetypes import detect_type

        kind = detect_type(Path(path))
        return self._options_key(kind[0] if kind else None)

    def _entry(
        self,
        f: FoundFile,
        sha: str,
        document_id: str,
        doc_type: str | None,
        chunks: int,
        status: str,
        error: str | None = None,
    ) -> mf.Entry:
        return mf.Entry(
            path=f.path,
            document_id=document_id,
            size=f.size,
            mtime_ns=f.mtime_ns,
            sha256=sha,
            type=doc_type,
            chunks=chunks,
            status=status,
            options=self._options_key(doc_type),
            ingested_at=now_iso(),
            error=error,
        )

    # -- moves and prunes -------------------------------------------------------------------

    def _move(self, new: _Work, old: mf.Entry) -> Event:
        start = time.perf_counter()
        self.summary.moved += 1
        if not self.opts.dry_run:
            assert self.coll is not None
            self.coll.move_document(old.document_id, new.found.path)
            self._wrote = True
            self.manifest.remove(old.path)
            moved = _restat(old, new.found)
            moved.path = new.found.path
            self.manifest.put(moved)
            self.manifest.flush()
        return {
            "type": "document",
            "status": "moved",
            "path": new.found.path,
            "document_id": old.document_id,
            "chunks": old.chunks,
            "from": old.path,
            "ms": _ms(start),
            **({"dry_run": True} if self.opts.dry_run else {}),
        }

    def _prune(self, gone: list[mf.Entry]) -> Iterator[Event]:
        """Remove documents under the paths named whose files no longer exist: those the
        manifest knows, and those a killed run stored without recording them."""
        doomed = {e.document_id: (e.path, e.chunks) for e in gone if e.document_id}
        known = self.manifest.ids()
        # One column scan tells whether the table holds documents the manifest does not
        # know (a run killed between its commit and its manifest write); only then are
        # their paths read.
        if self.coll is not None and not self.coll.document_ids() <= known.keys():
            for doc in self.coll.documents():
                if (
                    doc.document_id not in known
                    and under(doc.path, self.roots)
                    and not os.path.exists(doc.path)
                ):
                    doomed[doc.document_id] = (doc.path, doc.chunks)
        if not self.opts.dry_run:
            for e in gone:
                self.manifest.remove(e.path)
            if self.coll is not None and doomed:
                self.coll.delete_documents(doomed)
                self._wrote = True
            self.manifest.flush()
        for doc_id, (path, chunks) in sorted(doomed.items(), key=lambda kv: kv[1][0]):
            self.summary.removed += 1
            yield {
                "type": "document",
                "status": "removed",
                "path": path,
                "document_id": doc_id,
                "chunks": chunks,
                **({"dry_run": True} if self.opts.dry_run else {}),
            }

    # -- processing -------------------------------------------------------------------------

    def _stored_ids(self) -> set[str]:
        """Ids of the documents in the table (one column scan, once a run)."""
        if self._table_ids is None:
            coll = self.coll
            self._table_ids = coll.document_ids() if coll is not None and coll.count() else set()
        return self._table_ids

    def _table_has(self, document_id: str) -> bool:
        return document_id in self._stored_ids()

    def _process(self, work: list[_Work]) -> Iterator[Event]:
        taken = set(self.manifest.ids())  # ids in use, so a new one never collides
        waiting: list[_Doc] = []  # processed, in order, not yet committed
        last_commit = time.monotonic()
        for item in work:
            f = item.found
            old_ok = item.entry is not None and item.entry.status == mf.OK
            status = "updated" if old_ok or item.stored else "added"
            doc_id = (
                (item.entry.document_id if item.entry else "")
                or (item.stored[0] if item.stored else "")
                or document_id_for(f.path, taken)
            )
            taken.add(doc_id)
            if self.opts.dry_run:
                yield self._count({
                    "type": "document", "status": status, "path": f.path,
                    "document_id": doc_id, "chunks": None, "dry_run": True,
                })  # fmt: skip
                continue
            doc = None
            for event in self._one(item, doc_id, status):
                if isinstance(event, _Doc):
                    doc = event
                else:
                    yield event
            if doc is not None:
                waiting.append(doc)
            self._deliver(self.queue.drain())
            yield from self._check_down()
            ready = 0
            while ready < len(waiting) and waiting[ready].waiting == 0:
                ready += 1
            rows = sum(len(d.chunks) for d in waiting[:ready])
            due = time.monotonic() - last_commit >= self.opts.commit_seconds
            if ready and (rows >= self.opts.commit_rows or due):
                yield from self._commit(waiting[:ready])
                del waiting[:ready]
                last_commit = time.monotonic()
        if waiting:
            self._deliver(self.queue.drain(everything=True))
            yield from self._check_down()
            yield from self._commit(waiting)

    @staticmethod
    def _deliver(delivered: list[tuple[Any, Any]]) -> None:
        for (doc, index), vector in delivered:
            doc.deliver(index, vector)

    def _one(self, item: _Work, doc_id: str, status: str) -> Iterator[Event | _Doc]:
        """Parse and chunk one file, take the vectors the cache has and queue the rest;
        yields its events, then the `_Doc` (nothing if the file failed or is binary)."""
        from localgpt_cli.rag.chunk import chunk_document
        from localgpt_cli.rag.parse import parse_file
        from localgpt_cli.rag.store import embed_hash
        from localgpt_cli.rag.titles import document_title

        f = item.found
        start = time.perf_counter()
        try:
            if not item.sha256:
                raise InvalidInput(f"{f.path}: cannot read")
            parsed = parse_file(Path(f.path), max_bytes=self.opts.max_file_size)
            chunks = chunk_document(
                parsed,
                doc_id,
                size=self.opts.chunk_size,
                overlap=self.opts.chunk_overlap,
                max_chunks=self.opts.max_chunks,
            )
        except InvalidInput as exc:
            if exc.code == "binary_file":
                yield from self._skip(item, doc_id, None, exc.code, exc.message, start)
                return
            yield self._failed(item, exc.code, exc.message, start)
            return
        except Exception as exc:  # a parser bug on one odd file must not stop the run
            yield self._failed(item, "parse_error", f"{f.path}: {type(exc).__name__}: {exc}", start)
            return
        if not chunks:  # an empty file is not a document: nothing to find, nothing to list
            message = f"{f.path}: no text (empty file); skipped"
            yield from self._skip(item, doc_id, parsed.type, "empty", message, start)
            return
        title = document_title(parsed)
        del parsed.sections  # the chunks hold the text now
        for chunk in chunks:
            chunk.title = title
        doc = _Doc(doc_id, chunks, [embed_hash(c) for c in chunks])
        if item.stored is not None and item.stored[1] == doc.hashes and not self.opts.force:
            # The rows stored for this path are what this run would write: only the
            # manifest entry was missing, and it is all that is written.
            self.summary.unchanged += 1
            self.manifest.put(self._entry(f, item.sha256, doc_id, parsed.type, len(chunks), mf.OK))
            yield {"type": "progress", "files": 1, "chunks": 0}
            return
        for note in parsed.warnings:
            yield {"type": "warning", "code": "parse_warning", "message": f"{f.path}: {note}"}
        cached = self.queue.cached(doc.hashes)
        truncated = 0
        for i, (chunk, h) in enumerate(zip(chunks, doc.hashes, strict=True)):
            if h in cached:
                doc.vectors[i] = cached[h]
            else:
                doc.waiting += 1
                truncated += self.queue.put(embed_body(title, chunk.text), h, (doc, i))
        if truncated:
            yield {
                "type": "warning",
                "code": "embed_input_truncated",
                "message": f"{f.path}: {truncated} chunk(s) longer than the embed limit were "
                "cut for embedding (the stored text is whole); lower --chunk-size to avoid it.",
            }
        doc.stored = self._table_has(doc_id)
        doc.entry = self._entry(f, item.sha256, doc_id, parsed.type, len(chunks), mf.OK)
        doc.record = {
            "type": "document", "status": status, "path": f.path, "document_id": doc_id,
            "chunks": len(chunks), "reused": len(chunks) - doc.waiting, "ms": _ms(start),
        }  # fmt: skip
        self.summary.reused += len(chunks) - doc.waiting
        self.summary.chunks += len(chunks)
        self.summary.bytes += f.size
        yield {"type": "progress", "files": 1, "chunks": len(chunks)}
        yield doc

    def _skip(
        self,
        item: _Work,
        doc_id: str,
        doc_type: str | None,
        code: str,
        message: str,
        start: float,
    ) -> Iterator[Event | _Doc]:
        """A file with no text to index (binary, empty): remembered as skipped, so it costs a
        stat next time; if it was a document until now, its rows go with the next commit."""
        f = item.found
        skipped = self._entry(f, item.sha256, "", doc_type, 0, mf.SKIPPED)
        if not self._table_has(doc_id):
            self.manifest.put(skipped)
            yield self._skipped(f.path, code, message)
            return
        self.summary.skipped += 1
        gone = _Doc(doc_id, [], [])
        gone.stored, gone.entry = True, skipped
        gone.record = {
            "type": "document", "status": "removed", "path": f.path, "document_id": doc_id,
            "chunks": 0, "code": code, "message": message, "ms": _ms(start),
        }  # fmt: skip
        yield gone

    def _skipped(self, path: str, code: str, message: str) -> Event:
        """The record of a file counted as skipped: every file counted has one."""
        self.summary.skipped += 1
        return {
            "type": "document", "status": "skipped", "path": path, "document_id": None,
            "code": code, "message": message,
            **({"dry_run": True} if self.opts.dry_run else {}),
        }  # fmt: skip

    def _bad_name(self, f: FoundFile) -> Event:
        """A file whose name is not UTF-8 (old archives, another system's encoding): the
        store, the manifest and NDJSON all hold UTF-8, so it fails alone, shown with the
        bad bytes escaped (as `ls -b` does), and nothing is recorded for it."""
        shown = os.fsencode(f.path).decode("utf-8", "backslashreplace")
        return self._count({
            "type": "document", "status": "failed", "path": shown, "document_id": None,
            "code": "invalid_file_name",
            "message": f"{shown}: the file name is not valid UTF-8, so it cannot be stored; "
            "rename it (e.g. with convmv) to ingest it.",
            **({"dry_run": True} if self.opts.dry_run else {}),
        })  # fmt: skip

    def _failed(self, item: _Work, code: str, message: str, start: float) -> Event:
        f = item.found
        # Keep the last good document (if any) searchable; record the failure for `docs list`.
        if item.entry is None or item.entry.status != mf.OK:
            self.manifest.put(
                self._entry(f, item.sha256, "", None, 0, mf.FAILED, f"{code}: {message}")
            )
        self.summary.bytes += f.size
        return self._count({
            "type": "document", "status": "failed", "path": f.path,
            "document_id": item.entry.document_id if item.entry else None,
            "code": code, "message": message, "ms": _ms(start),
        })  # fmt: skip

    def _commit(self, docs: list[_Doc]) -> Iterator[Event]:
        """One commit for these documents, then their manifest entries, then their records."""
        self.library.check_lock()
        ids = [d.document_id for d in docs if d.chunks or d.stored]
        if ids:
            assert self.coll is not None
            if self.coll.model is None:
                self.coll.set_model(self.model)
            chunks = [c for d in docs for c in d.chunks]
            vectors = [v for d in docs for v in d.vectors]
            # write_documents marks the collection pending before such rows are stored
            self._pending_written += sum(v is None for v in vectors)
            append = not any(d.stored for d in docs)
            self.coll.write_documents(ids, chunks, vectors, append=append)
            self._wrote = True
            if self._table_ids is not None:
                self._table_ids.update(d.document_id for d in docs if d.chunks)
            self.queue.remember(
                h for d in docs for h, v in zip(d.hashes, d.vectors, strict=True) if v is not None
            )
        for d in docs:
            assert d.entry is not None
            self.manifest.put(d.entry)
        self.manifest.flush()
        for d in docs:
            d.record["pending"] = sum(v is None for v in d.vectors)
            yield self._count(d.record)

    def _count(self, record: Event) -> Event:
        status = record["status"]
        if status in ("added", "updated", "failed", "removed"):
            setattr(self.summary, status, getattr(self.summary, status) + 1)
        return record


def _utf8(path: str) -> bool:
    """Whether a path (as Python decodes file names: undecodable bytes become surrogates)
    can be written as UTF-8."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _restat(entry: mf.Entry, f: FoundFile) -> mf.Entry:
    return mf.Entry(**{**entry.__dict__, "size": f.size, "mtime_ns": f.mtime_ns})


def _ms(start: float) -> int:
    return round((time.perf_counter() - start) * 1000)
