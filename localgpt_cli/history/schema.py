"""The history database's tables, its schema version, and the forward migrations.

The version lives in `PRAGMA user_version`. MIGRATIONS[i] takes a database from
version i to i + 1, so a database of any older version is brought up to date by
running the steps after its version, in one transaction. A database whose version is
newer than SCHEMA_VERSION was written by a newer localgpt: it is refused, never
migrated down, because this version cannot know what the newer columns mean.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from localgpt_cli.errors import InvalidInput

# PRAGMA application_id: "LGPT", so another program's SQLite file is not mistaken for ours.
APPLICATION_ID = 0x4C475054

ROLES = ("system", "user", "assistant", "tool")

_V1 = (
    f"PRAGMA application_id = {APPLICATION_ID}",
    # message_count is kept by the triggers below so that listing conversations never
    # counts rows in messages (a million of them, for a heavy user).
    """
    CREATE TABLE conversations (
        id            TEXT PRIMARY KEY,
        title         TEXT,
        model         TEXT NOT NULL,
        created_at    TEXT NOT NULL,
        updated_at    TEXT NOT NULL,
        message_count INTEGER NOT NULL DEFAULT 0,
        metadata      TEXT NOT NULL DEFAULT '{}'
    )
    """,
    # Newest first: `history list` and `chat -c` walk this index backwards.
    "CREATE INDEX conversations_by_updated ON conversations (updated_at, id)",
    # pk is the stable integer rowid the full-text index points at (an implicit rowid
    # could change under VACUUM); id is the public, sortable id.
    f"""
    CREATE TABLE messages (
        pk              INTEGER PRIMARY KEY,
        id              TEXT NOT NULL UNIQUE,
        conversation_id TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
        seq             INTEGER NOT NULL,
        role            TEXT NOT NULL CHECK (role IN {ROLES!r}),
        content         TEXT NOT NULL DEFAULT '',
        thinking        TEXT,
        tool_calls      TEXT,
        tool_name       TEXT,
        tool_call_id    TEXT,
        metadata        TEXT NOT NULL DEFAULT '{{}}',
        created_at      TEXT NOT NULL,
        UNIQUE (conversation_id, seq)
    )
    """,
    # External-content index: the text is stored once, in messages; the triggers keep
    # the index in step with every insert, update and delete (cascades included).
    """
    CREATE VIRTUAL TABLE messages_fts USING fts5 (
        content,
        content = 'messages',
        content_rowid = 'pk',
        tokenize = 'unicode61 remove_diacritics 2'
    )
    """,
    """
    CREATE TRIGGER messages_after_insert AFTER INSERT ON messages BEGIN
        INSERT INTO messages_fts (rowid, content) VALUES (new.pk, new.content);
        UPDATE conversations SET message_count = message_count + 1
            WHERE id = new.conversation_id;
    END
    """,
    """
    CREATE TRIGGER messages_after_delete AFTER DELETE ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content)
            VALUES ('delete', old.pk, old.content);
        UPDATE conversations SET message_count = message_count - 1
            WHERE id = old.conversation_id;
    END
    """,
    """
    CREATE TRIGGER messages_after_update AFTER UPDATE OF content ON messages BEGIN
        INSERT INTO messages_fts (messages_fts, rowid, content)
            VALUES ('delete', old.pk, old.content);
        INSERT INTO messages_fts (rowid, content) VALUES (new.pk, new.content);
    END
    """,
)

# Which question an answer answers (types.Message.reply_to). A database written before
# had none: each answer and tool step gets the user message before it, which is what
# the order meant when one writer at a time wrote a conversation.
BACKFILL_REPLY_TO = """
    UPDATE {messages} AS a SET reply_to = (
        SELECT q.id FROM {messages} AS q
        WHERE q.conversation_id = a.conversation_id AND q.role = 'user' AND q.seq < a.seq
        ORDER BY q.seq DESC LIMIT 1)
    WHERE a.role <> 'user'
"""
_V2 = (
    "ALTER TABLE messages ADD COLUMN reply_to TEXT",
    BACKFILL_REPLY_TO.format(messages="messages"),
)

# history.keep_images: the bytes of the pictures a message sent (its metadata's `images`
# always has their hashes and sizes), deleted with it. {blob}: BLOB or bytea.
IMAGES_TABLE = """
    CREATE TABLE {table} (
        message_id text NOT NULL REFERENCES {messages} (id) ON DELETE CASCADE,
        sha256     text NOT NULL,
        media_type text NOT NULL,
        data       {blob} NOT NULL,
        PRIMARY KEY (message_id, sha256)
    )
"""
KEEP_IMAGE = ("INSERT INTO {table} (message_id, sha256, media_type, data)"
              " VALUES ({p}, {p}, {p}, {p}) ON CONFLICT DO NOTHING")
_V3 = (IMAGES_TABLE.format(table="message_images", messages="messages", blob="BLOB"),)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3)
SCHEMA_VERSION = len(MIGRATIONS)


def too_new(where: Path | str, version: int, known: int = SCHEMA_VERSION) -> InvalidInput:
    """The refusal for a database written by a newer localgpt (`known`: the newest version
    this one writes, SQLite's by default; pg_schema.py passes PostgreSQL's)."""
    return InvalidInput(
        f"history database {where} has schema version {version}, newer than this localgpt "
        f"knows ({known}); it was left unchanged.",
        hint="Upgrade localgpt to use it.",
    )


def user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, path: Path) -> None:
    """Bring the database up to SCHEMA_VERSION; a no-op (and no write lock) when it is.

    The version is read again under the write lock, so two processes opening a new
    database at the same moment do not both create the tables.
    """
    if user_version(conn) == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = user_version(conn)
        if version > SCHEMA_VERSION:
            raise too_new(path, version)
        for step in MIGRATIONS[version:]:
            for statement in step:
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
