"""`chat --explain`: the `sources` packet as a short table on stderr.

The same facts as the packet (what was searched, each passage kept or dropped with its
scores, stage and reason, what each stage did, S_ctx or why not, the re-run), in lines
a person can read next to the answer; scripts read the packet itself (`--json`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

SCORE_ORDER = ("vector", "bm25", "fused", "rerank", "gate", "model_rerank", "model_gate")


def _scores(scores: dict[str, Any]) -> str:
    keys = [k for k in SCORE_ORDER if scores.get(k) is not None]
    keys += sorted(k for k in scores if k not in SCORE_ORDER and scores[k] is not None)
    return " ".join(f"{k}={scores[k]:.3f}" if isinstance(scores[k], float)
                    else f"{k}={scores[k]}" for k in keys)  # fmt: skip


def explain_lines(payload: dict[str, Any]) -> list[str]:
    """The table, one string per line (tab-separated columns for the passages)."""
    from localgpt_cli.render.tables import quote_path

    lines = [f"searched: {payload.get('query', '')}"]
    question = payload.get("question")
    if question and question != payload.get("query"):
        lines.append(f"asked:    {question}")
    labels = [f"pipeline {payload.get('pipeline', 'full')}", f"mode {payload.get('mode')}"]
    if payload.get("intent"):
        labels.append(f"intent {payload['intent']}, domain {payload.get('domain')}")
    lines.append("          " + "; ".join(labels) + ("; re-run once" if payload.get("rerun")
                                                     else ""))  # fmt: skip
    lines.append("status\tid\tpassage\tscores\twhy")

    def passage(p: dict[str, Any]) -> str:
        # "(chunk N)" as the Sources footer writes it: PATH:N would read as a line number
        return f"{quote_path(p['path'])} (chunk {p['chunk']})"

    for p in payload.get("kept", []):
        lines.append(f"kept\t{p['id']}\t{passage(p)}\t{_scores(p.get('scores') or {})}\t")
    for p in payload.get("dropped", []):
        why = f"{p.get('stage')}: {p.get('reason')}"
        if p.get("verdict"):  # the model gate's, which the score gate's drops lack
            why += f" ({p['verdict']})"
        lines.append(f"dropped\t{p.get('id', '')}\t{passage(p)}\t"
                     f"{_scores(p.get('scores') or {})}\t{why}")
    stages = [f"{s['stage']} {s['status']}" + (f" ({s['reason']})" if s.get("reason") else "")
              for s in payload.get("stages", [])]  # fmt: skip
    if stages:
        lines.append("stages: " + ", ".join(stages))
    condensed = payload.get("condensed")
    if condensed is not None:
        counts = ", ".join(f"{len(condensed[k])} {k.replace('_', ' ')}"
                           for k in ("facts", "constraints", "open_issues"))  # fmt: skip
        lines.append(f"condensed: {counts}")
    else:
        lines.append(f"condensed: none ({payload.get('fallback_reason')}); "
                     "the kept passages went verbatim")  # fmt: skip
    return lines


def explain_packet(stream: IO[str], packet: Mapping[str, Any]) -> None:
    """What `--explain` adds on stderr for a packet besides the sources table: the memory
    report, and at `done` why the file tools did not see the current folder."""
    from localgpt_cli.render.memory import explain_memory

    payload = packet["payload"]
    if packet["type"] == "memory":
        explain_memory(stream, payload)
    elif packet["type"] == "done" and payload.get("files"):
        stream.write(files_line(payload["files"]) + "\n")


def files_line(files: dict[str, Any]) -> str:
    """`Files: … is your home folder, so the file tools read only …`."""
    where = "your home folder" if files["cwd_excluded"] == "home" else "the root folder"
    roots = ", ".join(files["roots"]) or "no folder (add one with --allow-folder PATH)"
    return f"Files: {files['cwd']} is {where}, not a root of the file tools; they read {roots}."
