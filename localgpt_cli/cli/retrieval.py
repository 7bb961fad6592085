"""The knowledge base as commands ask it: the collection and embedder the settings name,
bound for `search`, `eval`, chat retrieval and the `search_documents` tool.

The query logic itself is rag/query.py; this module only opens what the settings name
(the store through cli/kb.py, the embedder through `App`) and hands the results on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click

from localgpt_cli.cli.app import App, Finite
from localgpt_cli.errors import LocalGPTError

if TYPE_CHECKING:
    from localgpt_cli.kernel.grounding import Retrieved
    from localgpt_cli.rag.query import QueryTarget, Warn
    from localgpt_cli.rag.retrieve import SearchResult
    from localgpt_cli.rag.types import Hit

# --theta: the gate's strictness (rag/gate.py); outside 0-1 (or nan) is a usage error.
THETA = Finite(0.0, 1.0)
F = TypeVar("F", bound=Callable[..., Any])


def _set_rerank_model(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(App).set_flag("rag.rerank_model", value)


def rerank_model_option(f: F) -> F:
    """`--rerank-model PROFILE:MODEL` on search, eval and chat: a flag over
    `rag.rerank_model`, read where the collection is opened (`open_target`)."""
    return click.option(
        "--rerank-model", metavar="PROFILE:MODEL", callback=_set_rerank_model,
        expose_value=False,
        help="Re-score the first 20 candidates (at least 2k) with a reranker a provider "
             "serves (a cross-encoder behind /rerank); search's and chat's gate then keep a "
             "passage when its relevance reaches θ [default: rag.rerank_model, none].",
    )(f)  # fmt: skip


def open_target(app: App, collection: str | None = None) -> QueryTarget:
    """Open the collection to query, refusing an explicitly chosen model it was not built
    with (its vectors would not be comparable); `--provider NAME` alone means the
    collection's own model, when NAME serves it."""
    from localgpt_cli.cli.kb import chosen_embed_model, model_explicit, open_store, recorded_model
    from localgpt_cli.rag.query import QueryTarget

    coll = open_store(app).collection(collection or app.settings.collection)
    if app.embed_provider is not None and not model_explicit(app):
        model = recorded_model(app, coll)
    else:
        model = chosen_embed_model(app)
        if model_explicit(app):
            coll.check_model(model)
        model = coll.model or model
    return QueryTarget(coll, model, app.embedder(model=model), rerank_judge(app))


class ProviderReranker:
    """The reranker `--rerank-model` names, bound to its profile's server. Once it has
    failed it is not asked again by this command's queries, as a failed embedding is not
    (rag/query.py): the first failure is raised for each, and `failed` tells eval, which
    must not measure without it."""

    def __init__(self, provider: Any, model: str) -> None:
        self.provider = provider
        self.model = model
        self.failed: LocalGPTError | None = None

    def __call__(self, query: str, documents: Sequence[str]) -> list[float]:
        from localgpt_cli.llm.rerank import relevance

        if self.failed is not None:
            raise self.failed
        try:
            return relevance(self.provider, self.model, query, documents)
        except LocalGPTError as exc:
            self.failed = exc
            raise


def rerank_judge(app: App) -> ProviderReranker | None:
    """The reranker `--rerank-model` / `rag.rerank_model` names, or None."""
    named = rerank_model(app)
    if named is None:
        return None
    name, model = named
    return ProviderReranker(app.provider(name), model)


def rerank_model(app: App) -> tuple[str, str] | None:
    """(profile, model) of the reranker `--rerank-model` / `rag.rerank_model` names
    (PROFILE:MODEL), or None. A name that cannot work (no profile, an Ollama one: Ollama
    serves no reranker) is one line before any search, and before chat asks its model
    even when no knowledge base is searched: exit 2 from the flag, 6 from the config."""
    from localgpt_cli.config import unknown_provider
    from localgpt_cli.errors import setting_error

    settings = app.settings
    value = settings.values.get("rag.rerank_model")
    if not value:
        return None
    flag = settings.sources.get("rag.rerank_model") == "flag"
    where = "--rerank-model" if flag else settings.named("rag.rerank_model")
    name, _, model = str(value).partition(":")
    if not model:
        raise setting_error(where, f"{where} is {value!r}: a reranker is named PROFILE:MODEL.",
                            hint="For example: --rerank-model work:bge-reranker-v2-m3.")
    profile = settings.profiles.get(name)
    if profile is None and name != "ollama":
        unknown_provider(settings, name, where)
    kind = profile.kind if profile else "ollama"
    if kind != "openai":
        raise setting_error(
            where, f"{where} names profile {name!r} of kind {kind!r}, which serves no "
            "reranker (only an OpenAI-compatible server has a /rerank endpoint).",
            hint="Name a profile of kind \"openai\" whose server has /rerank "
                 "(llama-server --reranking, vLLM, Jina, Cohere).",
        )  # fmt: skip
    return name, model


def query_collection(
    app: App,
    query: str,
    *,
    k: int,
    mode: str = "hybrid",
    threshold: float | None = None,
    collection: str | None = None,
    doc_type: str | None = None,
    path_glob: str | None = None,
    document_id: str | None = None,
    warn: Warn | None = None,
    theta: float | None = None,
) -> SearchResult:
    """A `SearchResult` for `query`; an embedding failure is reported to `warn` (with its
    error code) and the search goes on by keywords."""
    results = query_many(
        app, [query], k=k, mode=mode, threshold=threshold, collection=collection,
        doc_type=doc_type, path_glob=path_glob, document_id=document_id, warn=warn,
        theta=theta,
    )  # fmt: skip
    return next(results)


def query_many(
    app: App,
    queries: Sequence[str],
    *,
    k: int,
    mode: str = "hybrid",
    threshold: float | None = None,
    collection: str | None = None,
    doc_type: str | None = None,
    path_glob: str | None = None,
    document_id: str | None = None,
    warn: Warn | None = None,
    batch_size: int = 64,
    theta: float | None = None,
) -> Iterator[SearchResult]:
    """`SearchResult`s for many queries, in order, over one open table (rag/query.py);
    `document_id` may be given as `docs list` prints it (12 characters) or any unique
    prefix. The fast path (reranker, then the gate at `theta`) runs on every query."""
    from localgpt_cli.rag import query

    target = open_target(app, collection)
    if document_id:
        from localgpt_cli.cli.kb import resolve_document

        document_id = resolve_document(target.collection, document_id)[0]
    yield from query.query_many(
        target, queries, k=k, mode=mode, threshold=threshold, doc_type=doc_type,
        path_glob=path_glob, document_id=document_id, warn=warn, batch_size=batch_size,
        theta=theta,
    )  # fmt: skip


def knowledge_base(app: App, required: bool | None) -> bool:
    """Whether the collection has documents; with --rag it must exist (exit 6 otherwise)."""
    from localgpt_cli.rag.query import collection_may_exist

    name = app.settings.collection
    if not required and not collection_may_exist(app.settings.db_uri, name):
        return False
    from localgpt_cli.cli.kb import open_store

    return open_store(app).collection(name).count() > 0


def resolve_theta(app: App, theta: float | None) -> float:
    """The gate's strictness: --theta, else `rag.theta` from the config, else the default.
    A config value outside 0-1 is invalid input (exit 6; the flag's range is click's)."""
    from localgpt_cli.errors import setting_error
    from localgpt_cli.rag.gate import DEFAULT_THETA

    if theta is not None:
        return theta
    value = app.settings.values.get("rag.theta")
    if value is None:
        return DEFAULT_THETA
    if not 0.0 <= value <= 1.0:  # nan fails both comparisons
        where = app.settings.named("rag.theta")
        raise setting_error(where, f"rag.theta must be between 0 and 1 (got {value!r} from "
                            f"{where}).", hint="0 keeps every passage the reranker kept, 1 "
                            "only near-certain support.")  # fmt: skip
    return float(value)


def chat_retriever(
    app: App, *, k: int, threshold: float | None, collection: str, theta: float | None = None
) -> Callable[[str], Retrieved]:
    """The retriever a chat turn calls with the user's message: the fast path (hybrid
    search, reranker, gate). Kept results carry their per-stage `scores`; dropped ones
    their `document_id`, `scores`, `stage` and `reason`."""
    from localgpt_cli.kernel.grounding import Retrieved
    from localgpt_cli.rag.query import dropped_result, source_result

    strictness = resolve_theta(app, theta)

    def retrieve(query: str) -> Retrieved:
        notes: list[str] = []
        result = query_collection(app, query, k=k, threshold=threshold, collection=collection,
                                  warn=lambda _code, message: notes.append(message),
                                  theta=strictness)  # fmt: skip
        return Retrieved(
            query=query,
            mode=result.mode_used,
            results=[source_result(h) for h in redacted_hits(app, result.hits)],
            dropped=[dropped_result(d) for d in result.dropped],
            warnings=notes + list(result.warnings),
        )

    return retrieve


def tool_search(app: App) -> Callable[[str, int, str | None], list[Hit]]:
    """The knowledge-base search the `search_documents` tool calls: (query, k, coll) -> hits."""

    def run(query: str, k: int, collection: str | None) -> list[Hit]:
        return redacted_hits(app, query_collection(app, query, k=k, collection=collection).hits)

    return run


def redacted_hits(app: App, hits: Sequence[Hit]) -> list[Hit]:
    """Passages on their way to a model with what looks like a secret replaced (redact.py),
    and a warning naming the document and line: an ingested `.env` must not reach the
    model, stdout or the history through retrieval either."""
    from localgpt_cli.redact import Finding, redact, summary

    for hit in hits:
        clean, found = redact(hit.text)
        if not found:
            continue
        hit.text = clean
        if hit.line_start is not None:
            found = [Finding(f.kind, hit.line_start + f.line - 1) for f in found]
        where = "" if hit.line_start is not None else f" (lines of chunk {hit.chunk})"
        app.output.warn("secret_redacted", f"{hit.path}: redacted {summary(found)}{where} "
                        "from a retrieved passage before the model saw it")
    return list(hits)
