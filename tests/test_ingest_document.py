"""rag/ingest/document.py: the one builder of the `document` event keeps the shapes and key
order the README's output contract shows, whatever the status."""

from __future__ import annotations

import json

from localgpt_cli.rag.ingest.document import document_event


def _line(event: dict) -> str:
    return json.dumps(event, separators=(",", ":"))


def test_document_events_keep_one_key_order_and_leave_out_what_does_not_apply():
    added = document_event("added", "/n/a.md", "ab12", chunks=3, reused=1, ms=5, pending=0)
    assert _line(added) == (
        '{"type":"document","status":"added","path":"/n/a.md","document_id":"ab12",'
        '"chunks":3,"reused":1,"ms":5,"pending":0}'
    )
    moved = document_event(
        "moved", "/n/b.md", "ab12", chunks=3, moved_from="/n/a.md", ms=2, dry_run=True
    )
    assert _line(moved) == (
        '{"type":"document","status":"moved","path":"/n/b.md","document_id":"ab12",'
        '"chunks":3,"from":"/n/a.md","ms":2,"dry_run":true}'
    )
    # a dry run does not cut files: the chunk count of an added file is unknown, not absent
    assert document_event("updated", "/n/a.md", "ab12", dry_run=True)["chunks"] is None
    # failed and skipped files have no chunks; a document_id of None is kept
    failed = document_event("failed", "/n/c.pdf", None, code="invalid_input", message="bad", ms=1)
    assert list(failed) == ["type", "status", "path", "document_id", "code", "message", "ms"]
    skipped = document_event("skipped", "/n/e.txt", None, code="empty", message="empty")
    assert "chunks" not in skipped and "dry_run" not in skipped
    removed = document_event("removed", "/n/d.md", "cd34", chunks=0, code="binary_file",
                             message="binary", ms=0, pending=0)  # fmt: skip
    assert list(removed)[4:] == ["chunks", "code", "message", "ms", "pending"]
