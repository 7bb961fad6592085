"""Tool selection (tool-RAG): which of many enabled tools to offer on this turn.

Every tool definition costs prompt tokens and small models choose worse among many, so
a turn's tools are chosen in three steps: the context filter (only the allowed groups,
`chat --tools files,knowledge`), then, beyond `limit` tools, the `top_k` non-core tools
of those groups whose text is closest to the user's message by cosine similarity, then
the allowed groups' core tools merged in. Tool vectors are cached on disk per
embedding model and text hash, so a warm turn costs one query embedding and a
matrix-vector product. Selection is an optimisation, never a reason to fail a turn:
whatever goes wrong, all allowed tools are sent, a warning says why, and the Selection's
`method` and `reason` (reported in `done.selection`) say which branch was taken.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localgpt_cli.tools.base import Tool

EmbedFn = Callable[[list[str]], list[list[float]]]
DEFAULT_LIMIT = 12
DEFAULT_TOP_K = 6
MAX_CACHED_VECTORS = 5_000
CACHE_MAGIC = b"LOCALGPT-TOOL-VECTORS 1"


@dataclass
class Selection:
    """The tools to send, their names, how they were chosen and why not otherwise.

    `method` is "semantic" (the allowed groups' core tools plus the top-K others by
    similarity), "context_filtered" (every tool of the allowed groups: `--tools GROUPS`
    was given and semantic selection was not needed or failed) or "all" (every enabled
    tool, for the same reasons). `reason` says why it is not "semantic"; `warning`, when
    set, is for stderr. `allowed` are the tools that may run this turn (the groups'
    tools, also those not offered).
    """

    tools: list[Tool]
    offered_names: list[str]
    method: str
    warning: str | None = None
    reason: str | None = None
    allowed: list[Tool] = field(default_factory=list)
    groups: list[str] | None = None

    def report(self) -> dict[str, Any]:
        """`done.selection`: how this turn's tools were chosen."""
        return {"method": self.method, "reason": self.reason, "groups": self.groups,
                "offered": self.offered_names}


def in_groups(tools: Iterable[Tool], groups: Sequence[str] | None) -> list[Tool]:
    """The context filter: the tools whose group is allowed (None allows every group)."""
    if groups is None:
        return list(tools)
    wanted = set(groups)
    return [t for t in tools if t.group in wanted]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def cache_file(cache_dir: Path, embed_model: str) -> Path:
    """One file per embedding model: vectors from two models are not comparable."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", embed_model)[:60]
    return cache_dir / f"tool-vectors-{slug}-{text_hash(embed_model)[:8]}.bin"


class CacheUnreadable(Exception):
    """The vector cache exists but cannot be read (permissions, I/O)."""


class ToolVectorCache:
    """Unit tool vectors keyed by text hash, in one file written atomically.

    The file is a magic line, a JSON header line (model, dimension, text hashes in row
    order) and the rows as little-endian float32: reading it is one read and a
    zero-copy view, which keeps a warm selection in the low milliseconds (an .npz
    spends as long again unzipping and parsing three array headers).
    """

    def __init__(self, path: Path, embed_model: str):
        self.path = path
        self.embed_model = embed_model
        self.hashes: list[str] = []
        self.vectors: Any = None  # numpy array (n, dim) of float32, unit rows
        self.rebuilt_reason: str | None = None

    def load(self) -> None:
        """Read the file; a corrupt one is dropped (it is derived data) and noted."""
        import numpy as np

        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:  # a directory, no permission, an I/O error
            raise CacheUnreadable(f"{self.path}: {exc.strerror or exc}") from exc
        try:
            magic, header_line, body = data.split(b"\n", 2)
            if magic != CACHE_MAGIC:
                raise ValueError("not a tool vector cache")
            header = json.loads(header_line)
            hashes = [str(h) for h in header["hashes"]]
            dim = int(header["dim"])
            vectors = np.frombuffer(body, dtype="<f4").reshape(len(hashes), dim)
        except Exception as exc:  # ValueError, KeyError, TypeError: a damaged file
            self.discard(f"was corrupt ({type(exc).__name__})")
            return
        if header.get("model") != self.embed_model:
            self.discard(f"belongs to model {header.get('model')!r}")
            return
        self.hashes, self.vectors = hashes, vectors

    def discard(self, reason: str) -> str:
        """Forget the cached vectors; returns the note for the selection's warning."""
        self.hashes, self.vectors = [], None
        self.rebuilt_reason = f"{self.path} {reason}; rebuilt it"
        return self.rebuilt_reason

    def lookup(self, hashes: Sequence[str], dim: int) -> tuple[Any, list[int]]:
        """Rows for `hashes` (zero where missing) and the positions that are missing."""
        import numpy as np

        index = {h: i for i, h in enumerate(self.hashes)}
        rows = np.zeros((len(hashes), dim), dtype=np.float32)
        missing = []
        for i, h in enumerate(hashes):
            j = index.get(h)
            if j is None:
                missing.append(i)
            else:
                rows[i] = self.vectors[j]
        return rows, missing

    def add_and_save(self, hashes: Sequence[str], vectors: Any) -> None:
        """Merge new unit vectors in and write the file (temp file + rename)."""
        import numpy as np

        if self.vectors is not None and self.vectors.shape[1] == vectors.shape[1]:
            new = set(hashes)
            keep = [i for i, h in enumerate(self.hashes) if h not in new]
            all_hashes = [self.hashes[i] for i in keep] + list(hashes)
            all_vectors = np.concatenate([self.vectors[keep], vectors])
        else:  # first use, or the model now gives another dimension
            all_hashes, all_vectors = list(hashes), vectors
        all_hashes = all_hashes[-MAX_CACHED_VECTORS:]
        all_vectors = all_vectors[-MAX_CACHED_VECTORS:]
        header = {"model": self.embed_model, "dim": int(all_vectors.shape[1]), "hashes": all_hashes}
        payload = b"\n".join(
            [
                CACHE_MAGIC,
                json.dumps(header, separators=(",", ":")).encode(),
                np.ascontiguousarray(all_vectors, dtype="<f4").tobytes(),
            ]
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tool-vectors-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(payload)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.hashes, self.vectors = all_hashes, all_vectors


def _unit_rows(vectors: list[list[float]]) -> Any:
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2:
        raise ValueError(f"expected a list of vectors, got an array of shape {matrix.shape}")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def _unselected(
    tools: list[Tool], groups: Sequence[str] | None, reason: str, warning: str | None = None
) -> Selection:
    """Every allowed tool: the degradation when semantic selection is unneeded or failed."""
    method = "all" if groups is None else "context_filtered"
    return Selection(list(tools), [t.name for t in tools], method, warning, reason,
                     list(tools), None if groups is None else list(groups))


def _failed(
    tools: list[Tool], groups: Sequence[str] | None, reason: str, detail: str
) -> Selection:
    warning = (f"Tool selection failed ({reason}: {detail}); offering all {len(tools)} "
               f"{'allowed' if groups is not None else 'enabled'} tools.")
    return _unselected(tools, groups, f"{reason}: {detail}", warning)


def select_tools(
    registry_tools: Iterable[Tool],
    user_message: str,
    *,
    embed: EmbedFn | None,
    embed_model: str,
    cache_dir: Path,
    limit: int = DEFAULT_LIMIT,
    top_k: int = DEFAULT_TOP_K,
    groups: Sequence[str] | None = None,
) -> Selection:
    """Choose the tools for one turn: context filter -> top-K within the allowed groups
    -> merge the groups' core tools. Whatever fails degrades to every allowed tool.

    `embed` embeds a list of texts (the caller batches it); it is called once for the
    user message and, on a cold cache, once with every tool text missing from the cache.
    """
    tools = in_groups(registry_tools, groups)
    if len(tools) <= limit:
        return _unselected(tools, groups, f"{len(tools)} tools, within the limit of {limit}")
    if embed is None:
        return _failed(tools, groups, "no embedder", "no embedding model available")
    core = [t for t in tools if t.core]
    others = [t for t in tools if not t.core]
    if not others:
        return _unselected(tools, groups, "only core tools")
    try:
        scores, notes = _scores(others, user_message, embed, embed_model, Path(cache_dir))
    except _StageError as exc:
        return _failed(tools, groups, exc.stage, exc.detail)
    import numpy as np

    best = np.argsort(-scores, kind="stable")[:top_k]
    chosen = core + [others[int(i)] for i in best]
    warning = "; ".join(notes) if notes else None
    return Selection(chosen, [t.name for t in chosen], "semantic", warning, None, tools,
                     None if groups is None else list(groups))


class _StageError(Exception):
    """Which stage of semantic selection failed: "index build failed" or "search error"."""

    def __init__(self, stage: str, detail: str) -> None:
        super().__init__(f"{stage}: {detail}")
        self.stage, self.detail = stage, detail


def _scores(
    others: list[Tool], message: str, embed: EmbedFn, embed_model: str, cache_dir: Path
) -> tuple[Any, list[str]]:
    """Similarity of each tool to `message`, and notes for the warning. The index is the
    cached tool vectors (built on a cold cache); the search is the query embedding."""
    cache = ToolVectorCache(cache_file(cache_dir, embed_model), embed_model)
    try:
        cache.load()
    except CacheUnreadable as exc:
        raise _StageError("index build failed", f"tool vector cache unreadable: {exc}") from None
    notes = [cache.rebuilt_reason] if cache.rebuilt_reason else []
    try:
        query = _unit_rows(embed([message]))
        if len(query) != 1:
            raise ValueError(f"{len(query)} vectors for 1 query")
    except Exception as exc:
        raise _StageError("search error", f"{type(exc).__name__}: {exc}") from None
    dim = query.shape[1]
    if cache.vectors is not None and cache.vectors.shape[1] != dim:
        notes = [cache.discard(f"held {cache.vectors.shape[1]}-dimensional vectors, not {dim}")]
    hashes = [text_hash(t.selection_text()) for t in others]
    rows, missing = cache.lookup(hashes, dim)
    if missing:
        try:
            new = _unit_rows(embed([others[i].selection_text() for i in missing]))
            if new.shape != (len(missing), dim):
                raise ValueError(f"got vectors of shape {new.shape} for {len(missing)} texts")
        except Exception as exc:
            raise _StageError("index build failed", f"{type(exc).__name__}: {exc}") from None
        rows[missing] = new
        try:
            cache.add_and_save([hashes[i] for i in missing], new)
        except OSError as exc:
            notes.append(f"could not save the tool vector cache {cache.path}: {exc}")
    return rows @ query[0], notes
