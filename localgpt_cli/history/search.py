"""Full-text search over stored messages: the FTS5 query and its ranking window."""

from __future__ import annotations

import sqlite3

from localgpt_cli.errors import InvalidInput
from localgpt_cli.history.types import SearchHit

SNIPPET_TOKENS = 16
# How many of the newest matching messages `search` ranks (see there).
SEARCH_WINDOW = 2000


def fts_query(text: str) -> str:
    """User text as an FTS5 query that cannot be a syntax error: every word a quoted string.

    Quoting makes `"`, `-`, `:`, `*`, `(`, AND/OR/NOT/NEAR plain text; the words are
    ANDed (FTS5's implicit operator). Words that hold no letters or digits match nothing.
    """
    words = text.replace("\x00", " ").split()
    if not words:
        raise InvalidInput("nothing to search for: the search text is empty.")
    return " ".join('"' + word.replace('"', '""') + '"' for word in words)


def search(
    conn: sqlite3.Connection, text: str, limit: int, highlight: tuple[str, str]
) -> list[SearchHit]:
    """Messages containing all the words of `text`, best match first (BM25).

    Any text is safe (see `fts_query`); empty text is InvalidInput. Matching ignores
    case and accents. The snippet marks matched words with `highlight`.

    Ranking considers the SEARCH_WINDOW most recent matching messages only: scoring
    every match of a word found in 100,000 messages takes a quarter of a second,
    while finding the 2,000 newest is cheap (the index is walked newest first and
    stops). Older matches of so common a word are out of view; more words narrow
    the search and bring them back.
    """
    if limit < 0:
        raise ValueError("limit must not be negative")
    query = fts_query(text)
    # The smallest rowid among the newest SEARCH_WINDOW matches; None if fewer match.
    floor = conn.execute(
        "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?"
        " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
        (query, SEARCH_WINDOW - 1),
    ).fetchone()
    rows = conn.execute(
        "SELECT m.conversation_id, c.title, m.id, m.seq, m.role, m.created_at,"
        " snippet(messages_fts, 0, ?, ?, '…', ?)"
        " FROM messages_fts"
        " JOIN messages AS m ON m.pk = messages_fts.rowid"
        " JOIN conversations AS c ON c.id = m.conversation_id"
        " WHERE messages_fts MATCH ? AND messages_fts.rowid >= ?"
        " ORDER BY rank LIMIT ?",
        (*highlight, SNIPPET_TOKENS, query, floor[0] if floor else 0, limit),
    ).fetchall()
    return [
        SearchHit(rank, cid, title, mid, seq, role, snippet, created_at)
        for rank, (cid, title, mid, seq, role, created_at, snippet) in enumerate(rows, 1)
    ]
