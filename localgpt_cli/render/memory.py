"""Project memory facts and the conversation-memory report (`chat --explain`), for people."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any

from localgpt_cli.project_memory import Fact
from localgpt_cli.render.output import Output
from localgpt_cli.render.tables import print_table, when


def print_facts(output: Output, facts: Sequence[Fact], status: str | None = None) -> None:
    """`memory` records (with `status` after add/rm), or a table / one line per change."""
    if output.json:
        for fact in facts:
            record = fact.to_record()
            output.record({**record, "status": status} if status else record)
        return
    if status is not None:
        for fact in facts:
            scope = _scope(fact)
            output.stdout.write(f"{status} {fact.id}  ({scope})  {fact.text}\n")
        output.stdout.flush()
        return
    rows = [[f.id, _scope(f), when(output, f.created_at), f.text]
            for f in facts]  # fmt: skip
    print_table(output, ["ID", "SCOPE", "ADDED", "TEXT"], rows)


def _scope(fact: Fact) -> str:
    scope = fact.collection or "global"
    return f"{scope}, important" if fact.important else scope


def _turn(entry: dict[str, Any]) -> str:
    extra = []
    if "score" in entry:
        extra.append(f"score {entry['score']:.2f} = (relevance {entry['relevance']:.2f}"
                     f" + 0.1) x fade {entry['fade']:.2f}")
    if entry.get("important"):
        extra.append("important")
    if "tokens" in entry:
        extra.append(f"~{entry['tokens']} tokens")
    return f"turn {entry['turn']}" + (f" ({', '.join(extra)})" if extra else "")


def _reason(entry: dict[str, Any]) -> str:
    reason = entry["reason"]
    if reason == "duplicate_of_file":
        return f"repeats {entry['file']}"
    if reason == "conflict" and "file" in entry:
        return f"contradicts {entry['file']}"
    if reason == "conflict":
        return f"contradicted by turn {entry['newer_turn']} ({entry['key']})"
    text = {"budget": "over the token budget", "window": "beyond the --window message cap",
            "faded": "faded"}.get(reason, reason)  # fmt: skip
    return f"recent, but {text}" if entry.get("recent") else text


def explain_memory(stream: IO[str], report: dict[str, Any]) -> None:
    """What conversation memory put into the prompt and what it left out, on stderr."""
    recent = ", ".join(str(n) for n in report["recent"]) or "none"
    stream.write(f"Memory: recent turns {recent}; {len(report['kept'])} of "
                 f"{report['candidates']} older turns kept, ~{report['tokens']} of "
                 f"{report['budget']} tokens\n")
    for entry in report["kept"]:
        stream.write(f"  kept    {_turn(entry)}\n")
    for entry in report["dropped"]:
        stream.write(f"  dropped {_turn(entry)}: {_reason(entry)}\n")
    if report.get("more_dropped"):
        stream.write(f"  … and {report['more_dropped']} more dropped\n")
    stream.flush()
