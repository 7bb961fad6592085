"""Rebuild corpus.jsonl from the installed click's docstrings (run once; the output is
committed so the collection does not change with click's version).

    python tests/data/clickdocs/make_corpus.py

One document per public click name (function or class) and per public method of the
classes users meet most (Context, Command, Group, Option, Parameter, ParamType, CliRunner,
Result), whose docstring is at least 60 characters: id = dotted name, title = the name
and signature, text = the docstring.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import click
import click.shell_completion
import click.testing

CLASSES = ("Context", "Command", "Group", "Option", "Parameter", "ParamType")
MIN_CHARS = 60


def signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def entries() -> list[dict[str, str]]:
    out: dict[str, dict[str, str]] = {}

    def add(name: str, obj: object) -> None:
        doc = inspect.getdoc(obj)
        if not doc or len(doc) < MIN_CHARS or name in out:
            return
        out[name] = {"_id": name, "title": f"{name}{signature(obj)}"[:200], "text": doc}

    for name in sorted(n for n in dir(click) if not n.startswith("_")):
        obj = getattr(click, name)
        if inspect.ismodule(obj):
            continue
        add(f"click.{name}", obj)
    owners = [(f"click.{c}", getattr(click, c)) for c in CLASSES]
    owners += [("click.testing.CliRunner", click.testing.CliRunner),
               ("click.testing.Result", click.testing.Result)]
    add("click.testing.CliRunner", click.testing.CliRunner)
    add("click.testing.Result", click.testing.Result)
    add("click.shell_completion.CompletionItem", click.shell_completion.CompletionItem)
    add("click.shell_completion.ShellComplete", click.shell_completion.ShellComplete)
    for prefix, cls in owners:
        for name, member in vars(cls).items():
            if name.startswith("_"):
                continue
            if isinstance(member, property):
                member = member.fget
            elif isinstance(member, (classmethod, staticmethod)):
                member = member.__func__
            if callable(member):
                add(f"{prefix}.{name}", member)
    return list(out.values())


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    docs = entries()
    with (here / "corpus.jsonl").open("w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    print(len(docs), "documents,", sum(len(d["text"]) for d in docs), "characters")
