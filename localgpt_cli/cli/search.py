"""`localgpt search QUERY`: the best passages of a collection for a query."""

from __future__ import annotations

from typing import Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.cli.kb import THRESHOLD, collection_options, embed_model_option
from localgpt_cli.cli.retrieval import THETA, rerank_model_option
from localgpt_cli.rag.filetypes import DOCUMENT_TYPES
from localgpt_cli.render.search import print_hits, print_query_hits

EPILOG = """\b
Examples:
  localgpt search "vpn setup"
  localgpt search -k 3 --json "vpn setup" | jq -r 'select(.type=="hit").path'
  localgpt search --mode keyword "ECONNREFUSED"
  localgpt search --type pdf --path '*/papers/*' "boundary layer"
  localgpt search -C code --doc 3f2a9c "retry backoff"
  localgpt search --rerank-model rr:bge-reranker-v2-m3 --theta 0.3 "vpn keys"
  localgpt search --queries questions.txt -k 10 --json    # one process, many queries
  localgpt search --provider work "vpn setup"  # the collection's work:MODEL embeds it
  printf 'vpn\\nbackup\\n' | localgpt search --queries - --json | jq -r 'select(.type=="hit")|[.query_id,.path]|@tsv'

\b
hybrid (default) fuses vector and full-text results by reciprocal rank; it falls back to
keyword search, with a warning, when Ollama is down or the collection has no embeddings.
--threshold is a cosine similarity (0 to 1) on the vector side: in vector mode every hit
must reach it; in hybrid mode a passage found only by its vector must, while one the
keyword side also found is kept; keyword mode (BM25 scores) does not use it. Its default
depends on the embedding model. A hit's score is the one that ranked it: a terminal names
it (rerank, fused, bm25 or cosine) with the cosine beside it; --json has all in `scores`.

\b
Every search runs the fast path: the local reranker re-scores the first 40 candidates
(similarity and BM25 combined, each passage scored by its document's best, the query's
words in the title), then the gate drops passages that do not address the question:
--theta 0 keeps all the reranker kept, 1 only near-certain support (default: rag.theta
in the config, else 0.15). A question nothing in the collection answers gets no hits.
--rerank-model PROFILE:MODEL adds a cross-encoder a provider serves (behind /rerank):
it re-scores the first 20 candidates (at least 2k), and the gate keeps a passage when
that relevance reaches --theta.
--json records carry each stage's score: scores.vector, bm25, fused, rerank,
provider_rerank, gate.

\b
--queries FILE reads one query per line: plain text (its id is the line number) or
JSON {"id": "...", "text": "..."}; every hit record then carries its query_id. A line that
does not parse stops the run (exit 6) before anything is searched.
"""  # noqa: E501 (a recipe pasted whole; tests/test_jq_recipes.py runs it)


@click.command(epilog=EPILOG)
@click.argument("query", required=False)
@click.option("--queries", "queries_file", metavar="FILE",
              help="Run every query of FILE (- for stdin), one per line.")  # fmt: skip
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True,
              help="Number of passages.")  # fmt: skip
@click.option(
    "--threshold",
    type=THRESHOLD,
    default=None,
    metavar="COSINE",
    help="Minimum cosine similarity (0-1) of vector hits [default: per model].",
)
@click.option("--theta", type=THETA, metavar="0-1",
              help="Gate strictness: 0 keeps all, 1 only near-certain support "
                   "[default: rag.theta, else 0.15].")  # fmt: skip
@click.option("--mode", type=click.Choice(["hybrid", "vector", "keyword"]), default="hybrid",
              show_default=True, help="How to match.")  # fmt: skip
@click.option("--type", "doc_type", type=click.Choice(DOCUMENT_TYPES, case_sensitive=False),
              help="Only this document type.")  # fmt: skip
@click.option("--path", "path_glob", metavar="GLOB", help="Only documents whose path matches.")
@click.option("--doc", "document_id", metavar="ID", help="Only this document.")
@rerank_model_option
@collection_options
@embed_model_option
@json_option
@pass_app
def search(
    app: App,
    query: str | None,
    queries_file: str | None,
    k: int,
    threshold: float | None,
    theta: float | None,
    mode: str,
    doc_type: str | None,
    path_glob: str | None,
    document_id: str | None,
) -> None:
    """Search a collection for QUERY (hybrid, vector or keyword)."""
    from localgpt_cli.cli.retrieval import query_collection, resolve_theta
    from localgpt_cli.errors import UsageError

    if query is None and queries_file is None:
        raise click.UsageError("Nothing to search for: give a QUERY or --queries FILE.")
    if query is not None and queries_file is not None:
        raise click.UsageError("Give a QUERY or --queries FILE, not both.")
    if query is not None and not query.strip():
        raise UsageError(
            "Nothing to search for: the query is empty.",
            hint='Give the words to look for, e.g. localgpt search "vpn setup".',
        )
    filters: dict[str, Any] = {"doc_type": doc_type, "path_glob": path_glob,
                               "document_id": document_id, "theta": resolve_theta(app, theta)}
    if queries_file is not None:
        _batch(app, queries_file, k=k, mode=mode, threshold=threshold, filters=filters)
        return
    assert query is not None
    result = query_collection(
        app, query, k=k, mode=mode, threshold=threshold, warn=app.output.warn, **filters
    )
    for warning in result.warnings:
        app.output.warn("search_fallback", warning)
    print_hits(app.output, result.hits, result.mode_used, query)


def _batch(
    app: App, path: str, *, k: int, mode: str, threshold: float | None, filters: dict[str, Any]
) -> None:
    """Every query of a file through one open collection; output streams per query."""

    from localgpt_cli.cli.retrieval import query_many
    from localgpt_cli.rag.queryfile import parse_questions, read_stdin, read_text, require_words

    source = "<stdin>" if path == "-" else path
    stdin = read_stdin() if path == "-" else None
    questions = parse_questions(read_text(path, stdin), source)
    if mode == "keyword":
        require_words(questions, source)
    out = app.output
    warned: set[str] = set()
    results = query_many(
        app, [q.text for q in questions], k=k, mode=mode, threshold=threshold,
        warn=app.output.warn, **filters,
    )  # fmt: skip
    for question, result in zip(questions, results, strict=True):
        for warning in result.warnings:
            if warning not in warned:  # the same fallback would repeat for every query
                warned.add(warning)
                out.warn("search_fallback", warning)
        print_query_hits(out, question.id, question.text, result.hits, result.mode_used)
