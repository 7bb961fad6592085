"""Retrieval: parse -> chunk -> embed -> store; retrieve; the ingest manifest and lock."""
