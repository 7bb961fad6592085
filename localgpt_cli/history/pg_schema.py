"""The PostgreSQL history's tables, its schema version, and the forward migrations.

The same rule as schema.py for SQLite: MIGRATIONS[i] takes a database from version i
to i + 1, all pending steps run in one transaction, and a database whose version is
newer than SCHEMA_VERSION (written by a newer localgpt) is refused, never migrated
down. The version is one row in `localgpt_schema`; an advisory lock makes two
processes meeting an empty database create the tables once.

Tables are prefixed `localgpt_` so a database shared with other programs stays tidy.
Times are the same ISO 8601 text as in SQLite (they sort as text and come back byte for
byte); metadata and tool calls are jsonb. `search` is the message's words as
textsearch.py folds them (accents off, case folded), so `history search` matches the
same messages as in SQLite; the GIN index answers it.
"""

from __future__ import annotations

from typing import Any

from localgpt_cli.history.schema import BACKFILL_REPLY_TO, IMAGES_TABLE, ROLES, too_new

# pg_advisory_xact_lock key for migrations: "LGPT" as in schema.APPLICATION_ID.
MIGRATION_LOCK = 0x4C475054

_ROLES = ", ".join(f"'{r}'" for r in ROLES)

_V1 = (
    """
    CREATE TABLE localgpt_conversations (
        id            text COLLATE "C" PRIMARY KEY,
        title         text,
        model         text NOT NULL,
        created_at    text NOT NULL,
        updated_at    text COLLATE "C" NOT NULL,
        message_count integer NOT NULL DEFAULT 0,
        metadata      jsonb NOT NULL DEFAULT '{}'
    )
    """,
    "CREATE INDEX localgpt_conversations_by_updated"
    " ON localgpt_conversations (updated_at DESC, id DESC)",
    f"""
    CREATE TABLE localgpt_messages (
        pk              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id              text COLLATE "C" NOT NULL UNIQUE,
        conversation_id text COLLATE "C" NOT NULL
                        REFERENCES localgpt_conversations (id) ON DELETE CASCADE,
        seq             integer NOT NULL,
        role            text NOT NULL CHECK (role IN ({_ROLES})),
        content         text NOT NULL DEFAULT '',
        thinking        text,
        tool_calls      jsonb,
        tool_name       text,
        tool_call_id    text,
        metadata        jsonb NOT NULL DEFAULT '{{}}',
        created_at      text NOT NULL,
        search          tsvector NOT NULL,
        UNIQUE (conversation_id, seq)
    )
    """,
    "CREATE INDEX localgpt_messages_search ON localgpt_messages USING GIN (search)",
)

_V2 = (
    "ALTER TABLE localgpt_messages ADD COLUMN reply_to text COLLATE \"C\"",
    BACKFILL_REPLY_TO.format(messages="localgpt_messages"),
)

_V3 = (IMAGES_TABLE.format(table="localgpt_message_images", messages="localgpt_messages",
                          blob="bytea"),)

MIGRATIONS: tuple[tuple[str, ...], ...] = (_V1, _V2, _V3)
SCHEMA_VERSION = len(MIGRATIONS)


def stored_version(conn: Any) -> int | None:
    """The stored version; None when localgpt has never written to this database."""
    exists = conn.execute("SELECT to_regclass('localgpt_schema')").fetchone()[0]
    if exists is None:
        return None
    row = conn.execute("SELECT version FROM localgpt_schema").fetchone()
    return 0 if row is None else int(row[0])


def migrate(conn: Any, where: str) -> None:
    """Bring the database up to SCHEMA_VERSION (`conn`: a psycopg connection in autocommit).

    Reads the version without a lock first, so the common case takes none; a newer
    version is refused before anything is written.
    """
    version = stored_version(conn)
    if version == SCHEMA_VERSION:
        return
    if version is not None and version > SCHEMA_VERSION:
        raise too_new(where, version, SCHEMA_VERSION)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        version = stored_version(conn)
        if version is None:
            conn.execute("CREATE TABLE localgpt_schema (version integer NOT NULL)")
            conn.execute("INSERT INTO localgpt_schema VALUES (0)")
            version = 0
        if version > SCHEMA_VERSION:
            raise too_new(where, version, SCHEMA_VERSION)
        for step in MIGRATIONS[version:]:
            for statement in step:
                conn.execute(statement)
        conn.execute("UPDATE localgpt_schema SET version = %s", (SCHEMA_VERSION,))
