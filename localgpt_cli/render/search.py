"""Knowledge-base search hits for people and scripts: NDJSON records, rich or plain lines.

A terminal gets each passage under a heading line (rank, score, where it is) with the
query's words highlighted; a pipe gets one tab-separated line per hit (rank, score,
location, text with its whitespace collapsed) so `cut` and `awk` work on it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from localgpt_cli.render.tables import display_path

if TYPE_CHECKING:
    from localgpt_cli.render.output import Output


def hit_record(hit: Any, mode: str) -> dict[str, Any]:
    """The `hit` NDJSON record of one passage, found in `mode` (the mode actually used)."""
    return {
        "type": "hit", "rank": hit.rank, "score": round(hit.score, 6),
        "document_id": hit.document_id, "path": hit.path, "chunk": hit.chunk, "page": hit.page,
        "text": hit.text, "heading": hit.heading, "line_start": hit.line_start,
        "line_end": hit.line_end, "doc_type": hit.type, "mode": mode,
        **({"scores": hit.extra["scores"]} if "scores" in hit.extra else {}),
        **ocr_keys(hit.ocr_confidence),
    }  # fmt: skip


def ocr_keys(confidence: float | None) -> dict[str, Any]:
    """`"ocr": true` and the page's mean confidence, on a passage read by OCR (else none)."""
    return {} if confidence is None else {"ocr": True, "ocr_confidence": confidence}


def print_hits(output: Output, hits: Sequence[Any], mode: str, query: str) -> None:
    """The hits of one query: records, a rich list, or plain lines; a note when none."""
    if output.json:
        for hit in hits:
            output.record(hit_record(hit, mode))
        return
    if not hits:
        output.stderr.write("No passages found.\n")
        return
    if output.pretty:
        _pretty(output, hits, query)
        return
    for hit in hits:
        output.stdout.write(_plain(hit) + "\n")
    output.stdout.flush()


def print_query_hits(
    output: Output, query_id: str, query: str, hits: Sequence[Any], mode: str
) -> None:
    """The hits of one query of a `--queries` file: each record or line names its query,
    and a terminal shows a rule with the query above its passages."""
    if output.json:
        for hit in hits:
            output.record({**hit_record(hit, mode), "query_id": query_id})
    elif output.pretty:
        from rich.markup import escape

        title = f"[bold]{escape(query_id)}[/bold]  {escape(query)}"
        output.console().rule(title, align="left")
        _pretty(output, hits, query)
    else:
        for hit in hits:
            output.stdout.write(f"{query_id}\t{_plain(hit)}\n")
        output.stdout.flush()


def _plain(hit: Any) -> str:
    text = " ".join(hit.text.split())
    return f"{hit.rank}\t{hit.score:.4f}\t{_location(hit)}\t{text}"


# The scores a hit may carry (`scores` in --json), in the order the search computes them.
SCORE_NAMES = {"vector": "cosine", "bm25": "bm25", "fused": "fused", "rerank": "rerank"}


def score_label(hit: Any) -> str:
    """The ranking score named (`rerank 1.320`: a reranker's is not a cosine), and the
    cosine beside it when the vector side found the passage: that is the score
    --threshold compares."""
    scores = hit.extra.get("scores") or {}
    name = next((label for key, label in reversed(SCORE_NAMES.items())
                 if isinstance(scores.get(key), (int, float))
                 and abs(scores[key] - hit.score) < 1e-6), "score")  # fmt: skip
    text = f"{name} {hit.score:.3f}"
    if name != "cosine" and isinstance(scores.get("vector"), (int, float)):
        text += f" · cosine {scores['vector']:.3f}"
    return text


def _location(hit: Any) -> str:
    path = display_path(hit.path)
    if hit.page is not None:
        return f"{path}:{hit.page}"
    if hit.line_start is not None:
        return f"{path}:{hit.line_start}-{hit.line_end}"
    return path


def _pretty(out: Output, hits: Sequence[Any], query: str) -> None:
    from rich.padding import Padding
    from rich.text import Text

    words = sorted({w for w in re.findall(r"\w+", query.lower()) if len(w) > 1}, key=len)
    pattern = (
        re.compile(r"\b(?:" + "|".join(re.escape(w) for w in reversed(words)) + r")\w*", re.I)
        if words
        else None
    )
    console = out.console()
    for hit in hits:
        head = Text()
        head.append(f"{hit.rank:>2}. ", style="bold")
        head.append(f"{score_label(hit)}  ", style="dim")
        head.append(_location(hit), style="cyan")
        if hit.heading:
            head.append(f"  {hit.heading}", style="dim")
        console.print(head)
        body = Text(hit.text.strip())
        if pattern is not None:
            body.highlight_regex(pattern, style="bold yellow")
        console.print(Padding(body, (0, 0, 1, 4)))
