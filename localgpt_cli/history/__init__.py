"""Conversations and messages: the `Store` protocol and its backends, SQLite (sqlite.py, the
only SQLite code in localgpt), in memory (memory.py) and PostgreSQL (postgres.py).

Use `SQLiteStore.open(path)` (or `App.history()`, which picks the configured backend);
see protocol.py for how a turn is meant to be stored.
"""

from localgpt_cli.history.protocol import Store
from localgpt_cli.history.sqlite import SQLiteStore
from localgpt_cli.history.types import Conversation, ConversationSummary, Message, SearchHit

__all__ = ["Conversation", "ConversationSummary", "Message", "SQLiteStore", "SearchHit", "Store"]
