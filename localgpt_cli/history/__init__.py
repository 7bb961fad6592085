"""The SQLite store of conversations and messages (the only SQLite code in localgpt).

Use `HistoryStore.open(path)`; see store.py for how a turn is meant to be stored.
"""

from localgpt_cli.history.store import HistoryStore
from localgpt_cli.history.types import Conversation, ConversationSummary, Message, SearchHit

__all__ = ["Conversation", "ConversationSummary", "HistoryStore", "Message", "SearchHit"]
