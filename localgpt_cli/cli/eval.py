"""`localgpt eval`: retrieval quality of a collection on the user's own labelled questions."""

from __future__ import annotations

import time
from typing import Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.cli.kb import THRESHOLD, collection_options, embed_model_option
from localgpt_cli.cli.retrieval import rerank_model_option

EPILOG = """\b
Examples:
  localgpt eval --queries questions.jsonl --qrels judgements.tsv
  localgpt eval -C papers --queries q.txt --qrels q.tsv --mode hybrid -k 5
  localgpt eval --queries q.jsonl --qrels q.tsv --json | jq -r 'select(.name=="ndcg@10")'
  localgpt eval --provider work --queries q.txt --qrels q.tsv  # the collection's work:MODEL

\b
Queries: one per line, JSON {"id": "...", "text": "..."} or plain text (id = line number).
Qrels: TSV lines 'query-id<TAB>doc<TAB>grade' (a first line naming the columns, such as
'query-id corpus-id score', is skipped; TREC's 'query-id 0 doc grade' works too).
A grade > 0 is relevant and is the gain in nDCG.
doc names a document by its path relative to the folder you ingested (notes/vpn.md) or by
its file name without extension (vpn).

\b
Passages are mapped to their documents (a document ranks where its best passage ranks).
Each mode runs as search does, with the local reranker (--rerank none: without it, to
see what it gains) and, with --rerank-model, a provider's reranker after it; the gate
is not applied (it cuts the list, not the order).
Printed per mode: nDCG@k, recall@k, recall@100, MRR@k, and how many queries have no
relevant document in the top k. Queries without a relevant judgement are not scored.
"""

MODES = ("keyword", "vector", "hybrid")
# Documents ranked per query: recall@100 needs 100 of them whatever -k is.
MIN_DEPTH = 100
# Passages fetched per wanted document at first; queries whose passages cover too few
# distinct documents are asked again with twice as many, up to this many per document.
FIRST_FETCH = 2
MAX_FETCH = 16


def _modes(value: str) -> list[str]:
    modes = [m.strip() for m in value.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise click.BadParameter(
            f"{', '.join(bad) or value!r}: use one or more of {', '.join(MODES)}, comma-separated."
        )
    return list(dict.fromkeys(modes))


@click.command(epilog=EPILOG)
@click.option("--queries", "queries_file", required=True, metavar="FILE",
              help="Questions, one per line (- for stdin).")  # fmt: skip
@click.option("--qrels", "qrels_file", required=True, metavar="FILE",
              help="Relevance judgements: query-id, doc, grade (TSV).")  # fmt: skip
@click.option("--mode", "modes", default=None, metavar="MODES",
              help="Comma-separated: keyword,vector,hybrid [default: all three; keyword "
                   "alone when the collection has no embeddings].")  # fmt: skip
@click.option("-k", "k", type=click.IntRange(min=1, max=1000), default=10, show_default=True,
              help="Cut-off for nDCG, recall and MRR.")  # fmt: skip
@click.option("--rerank", type=click.Choice(["local", "none"]), default="local",
              show_default=True,
              help="Re-score candidates with the local reranker, or not (for comparison).")
@rerank_model_option
@click.option(
    "--threshold",
    type=THRESHOLD,
    default=None,
    metavar="COSINE",
    help="Minimum cosine similarity (0-1) of vector hits [default: as search].",
)
@collection_options
@embed_model_option
@json_option
@pass_app
def eval_command(
    app: App,
    queries_file: str,
    qrels_file: str,
    modes: str | None,
    k: int,
    rerank: str,
    threshold: float | None,
) -> None:
    """Measure retrieval quality (nDCG, recall, MRR) on labelled questions."""
    from localgpt_cli.cli.retrieval import open_target
    from localgpt_cli.rag.evaluate import score_run
    from localgpt_cli.rag.gate import judge_depth
    from localgpt_cli.rag.query import resolve_threshold

    asked = _modes(modes) if modes is not None else None
    questions, qrels, q_source, r_source = _read_labels(queries_file, qrels_file)
    target = open_target(app)
    coll = target.collection
    judgements = _resolve(coll, qrels, r_source)
    scored = [q for q in questions if any(g > 0 for g in judgements.get(q.id, {}).values())]
    if len(scored) < len(questions):
        app.output.warn(
            "unjudged_queries",
            f"{len(questions) - len(scored)} of {len(questions)} queries have no relevant "
            "judgement and are not scored.",
        )
    wanted = _measurable(app, coll, asked)
    vectors: list[Any] = [None] * len(scored)
    if any(m != "keyword" for m in wanted):
        from localgpt_cli.rag.embedding import embed_queries

        # No keyword fallback here: figures labelled "vector" must come from vectors.
        vectors = embed_queries(target.client, target.model, [q.text for q in scored])
    if "keyword" in wanted:
        from localgpt_cli.rag.queryfile import require_words

        require_words(scored, q_source)
    limit = resolve_threshold(target, threshold)
    items = [(q.text, v) for q, v in zip(scored, vectors, strict=True)]
    depth = max(k, MIN_DEPTH)
    judge = target.judge
    # The reranker sees what `search -k K` gives it, although each mode fetches more.
    options = {"rerank": rerank, "judge": judge, "judge_depth": judge_depth(k)}
    rows = []
    for mode in wanted:
        start = time.perf_counter()
        rankings = document_rankings(coll, items, mode=mode, depth=depth, threshold=limit,
                                     **options)  # fmt: skip
        failed = getattr(judge, "failed", None)
        if failed is not None:  # figures labelled with the reranker must come from it
            raise failed
        seconds = time.perf_counter() - start
        by_query = {q.id: r for q, r in zip(scored, rankings, strict=True)}
        rows.append((mode, score_run(by_query, judgements, k), seconds))
    named = app.settings.values.get("rag.rerank_model")
    _show(app, coll.name, rows, f"{rerank} + {named}" if judge else rerank)


def _read_labels(queries_file: str, qrels_file: str) -> tuple[list[Any], Any, str, str]:
    """(questions, qrels, their two source names), with every judged query id checked
    against the query file. At most one of the two files may be stdin."""

    from localgpt_cli.errors import InvalidInput
    from localgpt_cli.rag.evaluate import parse_qrels
    from localgpt_cli.rag.queryfile import parse_questions, read_stdin, read_text

    if queries_file == "-" and qrels_file == "-":
        raise click.UsageError("Only one of --queries and --qrels can be read from stdin.")
    stdin = read_stdin() if "-" in (queries_file, qrels_file) else None
    q_source = "<stdin>" if queries_file == "-" else queries_file
    r_source = "<stdin>" if qrels_file == "-" else qrels_file
    questions = parse_questions(read_text(queries_file, stdin), q_source)
    qrels = parse_qrels(read_text(qrels_file, stdin), r_source)
    ids = {q.id for q in questions}
    for (qid, _doc), line in sorted(qrels.lines.items(), key=lambda item: item[1]):
        if qid not in ids:
            raise InvalidInput(
                f"{r_source}:{line}: query id {qid!r} is not in {q_source}.",
                hint="The qrels must use the ids of the query file (plain lines: line numbers).",
            )
    return questions, qrels, q_source, r_source


def _measurable(app: App, coll: Any, wanted: list[str] | None) -> list[str]:
    """The modes to measure: those asked for, or all three; keyword only (with a warning)
    when the collection has no embeddings and none were asked for."""
    from localgpt_cli.errors import InvalidInput

    has_vectors = coll.has_vectors()
    if wanted is None:
        if has_vectors:
            return list(MODES)
        app.output.warn(
            "no_embeddings",
            f"Collection {coll.name!r} has no embeddings: evaluating keyword mode only.",
        )
        return ["keyword"]
    if not has_vectors and any(m != "keyword" for m in wanted):
        raise InvalidInput(
            f"Collection {coll.name!r} has no embeddings: vector and hybrid cannot be measured.",
            hint="Run localgpt ingest with Ollama up first, or use --mode keyword.",
        )
    return wanted


def document_rankings(
    collection: Any,
    items: list[tuple[str, Any]],
    *,
    mode: str,
    depth: int,
    threshold: float,
    **options: Any,
) -> list[list[str]]:
    """The top `depth` document ids per query, from passage rankings.

    Long documents fill a passage list with their chunks, so `depth` documents need more
    than `depth` passages: queries are asked for twice as many, and those still short of
    distinct documents (while more passages exist) again with twice as many. `options`
    go to `search_many` (fusion settings, for the benchmark).
    """
    from localgpt_cli.errors import InvalidInput
    from localgpt_cli.rag.evaluate import document_ranking
    from localgpt_cli.rag.retrieve import search_many

    rankings: list[list[str]] = [[] for _ in items]
    todo = list(range(len(items)))
    fetch = depth * FIRST_FETCH
    while todo:
        results = search_many(
            collection, [items[i] for i in todo], k=fetch, mode=mode, threshold=threshold,
            **options,
        )
        again = []
        for i, result in zip(todo, results, strict=True):
            if mode != "keyword" and result.mode_used == "keyword":
                raise InvalidInput(f"{mode} search fell back to keywords: {result.warnings}")
            docs = document_ranking(h.document_id for h in result.hits)
            rankings[i] = docs[:depth]
            if len(docs) < depth and len(result.hits) == fetch and fetch < depth * MAX_FETCH:
                again.append(i)
        todo, fetch = again, fetch * 2
    return rankings


def _resolve(coll: Any, qrels: Any, source: str) -> dict[str, dict[str, int]]:
    """Qrels with document names replaced by stored document ids; every name must resolve."""
    from localgpt_cli.errors import InvalidInput
    from localgpt_cli.rag.evaluate import DocumentNames

    names = DocumentNames((d.document_id, d.path) for d in coll.documents())
    out: dict[str, dict[str, int]] = {}
    unknown: list[tuple[int, str]] = []
    for (qid, doc), line in sorted(qrels.lines.items(), key=lambda item: item[1]):
        try:
            document_id = names.resolve(doc)
        except InvalidInput as exc:
            raise InvalidInput(f"{source}:{line}: {exc.message}", hint=exc.hint) from None
        if document_id is None:
            unknown.append((line, doc))
            continue
        grades = out.setdefault(qid, {})
        grades[document_id] = max(grades.get(document_id, 0), qrels.grades[qid][doc])
    if unknown:
        line, doc = unknown[0]
        more = f" ({len(unknown) - 1} more unknown names)" if len(unknown) > 1 else ""
        raise InvalidInput(
            f"{source}:{line}: no document in collection {coll.name!r} is named {doc!r}{more}.",
            hint="Name documents by their path relative to the ingested folder or by file "
            "name without extension (see: localgpt docs list).",
        )
    return out


def _show(app: App, collection: str, rows: list[tuple[str, Any, float]], rerank: str) -> None:
    from localgpt_cli.render.tables import print_table

    out = app.output
    if out.json:
        for mode, scores, seconds in rows:
            for name, value in scores.named().items():
                out.record({
                    "type": "metric", "mode": mode, "name": name,
                    "value": value if isinstance(value, int) else round(value, 4),
                    "queries": scores.queries, "collection": collection,
                    "seconds": round(seconds, 3), "rerank": rerank,
                })  # fmt: skip
        return
    k = rows[0][1].k
    headers = ["mode", f"nDCG@{k}", f"R@{k}", "R@100", f"MRR@{k}", f"none@{k}", "queries", "q/s"]
    table = [
        [mode, f"{s.ndcg:.4f}", f"{s.recall:.4f}", f"{s.recall_100:.4f}", f"{s.mrr:.4f}",
         s.no_relevant, s.queries, f"{s.queries / seconds:.0f}" if seconds > 0 else "-"]
        for mode, s, seconds in rows
    ]  # fmt: skip
    title = f"Retrieval quality of {collection!r} (reranker: {rerank})"
    print_table(out, headers, table, title=title)
