"""Index health: a run killed before its final optimize leaves rows the full-text index
does not cover, or no full-text index at all. `docs stats` reports it, search warns about
a missing full-text index, and the next ingest repairs it even when no file changed."""

from __future__ import annotations

from pathlib import Path

from tests.cli import invoke
from tests.kb import home


def _notes(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "sky.md").write_text("# Sky\n\nThe observatory logged many observations of quasars.\n")
    (notes / "sea.md").write_text("# Sea\n\nThe harbour master counts the boats at dawn.\n")
    return notes


def _health() -> dict:
    r = invoke("docs", "stats", "--json")
    assert r.exit_code == 0, r.stderr
    return r.records()[0]["health"]


def _keyword(word: str):
    r = invoke("search", "--mode", "keyword", word, "--json")
    assert r.exit_code == 0, r.stderr
    return [Path(h["path"]).name for h in r.records() if h["type"] == "hit"], r.stderr


def _ingest_killed_at_the_final_optimize(notes: Path, standin) -> None:
    """An ingest that stops where the final optimize begins (as a SIGKILL there does):
    its rows are committed and its manifest written, its indexes not brought up to date."""
    from localgpt_cli.llm.ollama import OllamaClient
    from localgpt_cli.rag.ingest.options import IngestOptions
    from localgpt_cli.rag.ingest.run import Ingest
    from localgpt_cli.rag.store import open_store

    run = Ingest(
        IngestOptions(paths=[str(notes)]), store=open_store(home() / "lancedb"),
        collection="default", model="nomic-embed-text", model_explicit=False,
        client=OllamaClient(standin.url), home=home(),
    )  # fmt: skip
    events = run.run()
    for event in events:
        if event.get("phase") == "optimizing":
            break
    else:
        raise AssertionError("the run never reached its final optimize")
    events.close()  # ends the run there: no optimize, the lock is released


def test_rows_left_unindexed_by_a_killed_run_are_reported_and_indexed_by_the_next(
    standin, tmp_path
):
    notes = _notes(tmp_path)
    _ingest_killed_at_the_final_optimize(notes, standin)
    health = _health()
    assert health["ok"] is False and health["unindexed_rows"] == 2
    assert health["fts_index"] == {
        "present": True, "stale": True, "indexed_rows": 0, "unindexed_rows": 2
    }  # fmt: skip
    text = invoke("docs", "stats")
    assert "2 rows not indexed yet: the next ingest into this collection rebuilds it" in (
        text.stdout
    )
    r = invoke("ingest", str(notes), "--json")  # nothing changed: it still repairs
    assert r.exit_code == 0, r.stderr
    assert '"unchanged":2' in r.stdout and "index_repair" in r.stderr
    health = _health()
    assert health["ok"] is True and health["unindexed_rows"] == 0
    assert health["fts_index"]["indexed_rows"] == 2 and health["fts_index"]["stale"] is False
    assert invoke("docs", "stats").stdout.count("index health") == 1
    assert "index_repair" not in invoke("ingest", str(notes), "--json").stderr  # once


def test_a_missing_full_text_index_is_reported_warned_about_and_rebuilt(standin, tmp_path):
    from localgpt_cli.rag.store import open_store

    notes = _notes(tmp_path)
    assert invoke("ingest", str(notes)).exit_code == 0
    assert _keyword("observation")[0] == ["sky.md"]  # stemmed: finds "observations"
    # what a run killed between creating the table and indexing it leaves
    open_store(home() / "lancedb").collection("default").table.drop_index("text_idx")

    health = _health()
    assert health["ok"] is False and health["unindexed_rows"] == 2
    assert health["fts_index"]["present"] is False
    hits, warning = _keyword("observation")
    assert hits == []  # without the index's stemming the word form does not match
    assert "no full-text index" in warning and "localgpt ingest -C default" in warning
    hybrid = invoke("search", "observation", "--json")
    assert "no full-text index" in hybrid.stderr

    r = invoke("ingest", str(notes), "--json")
    assert r.exit_code == 0, r.stderr
    assert "no full-text index" in r.stderr  # said once, as it is repaired
    health = _health()
    assert health["ok"] is True and health["fts_index"]["present"] is True
    assert health["fts_index"]["indexed_rows"] == 2
    hits, warning = _keyword("observation")
    assert hits == ["sky.md"] and warning == ""
