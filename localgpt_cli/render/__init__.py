"""Packets and records -> NDJSON, rich pretty text, or plain text."""
