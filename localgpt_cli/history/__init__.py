"""The SQLite store of conversations and messages."""
