"""Project memory: short facts the user curates (`localgpt memory add …`), kept in the home.

Facts go into every prompt right after the system rules, so they must never be lost or
half-written: the file (`<home>/memory.jsonl`, one fact a line, mode 0600) is rewritten
whole into a temporary file beside it and moved into place with `os.replace`, under an
exclusive `flock` on `<home>/memory.lock`, so two writers take turns (the second reads
what the first wrote) and a reader sees the old file or the new one, never a mix.

A fact is global, or belongs to a collection (`--collection NAME`): a chat uses the
global facts and those of its collection (`-C`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from localgpt_cli.errors import AmbiguousId, InvalidInput, NotFound, UsageError
from localgpt_cli.ids import new_id, normalize_prefix

FILE_NAME = "memory.jsonl"
LOCK_NAME = "memory.lock"
MAX_FACT_CHARS = 1000  # a fact is a sentence or two; it rides along in every prompt


@dataclass(frozen=True)
class Fact:
    id: str
    text: str
    collection: str | None  # None: every collection
    created_at: str
    important: bool = False  # kept first when the facts pass their share of the prompt

    def to_record(self) -> dict[str, Any]:
        return {"type": "memory", "id": self.id, "text": self.text,
                "collection": self.collection, "created_at": self.created_at,
                "important": self.important}  # fmt: skip


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def clean_text(text: str) -> str:
    """The fact as stored: one line (a newline would read as two facts in the prompt)."""
    cleaned = " ".join(text.split())
    bad = next((i for i, ch in enumerate(cleaned) if "\udc80" <= ch <= "\udcff"), None)
    if bad is not None:  # how Python passes an argument's bytes that are not UTF-8
        raise InvalidInput(
            f"The fact is not UTF-8 text: byte 0x{ord(cleaned[bad]) - 0xDC00:02x} at character "
            f"{bad + 1}; nothing was stored.",
            hint="Give the fact as UTF-8 (check the terminal's locale, e.g. LANG=C.UTF-8).",
        )
    if not cleaned:
        raise UsageError("The fact is empty.", hint='localgpt memory add "we deploy with Ansible"')
    if len(cleaned) > MAX_FACT_CHARS:
        raise UsageError(
            f"The fact is {len(cleaned):,} characters; project memory keeps facts of at most "
            f"{MAX_FACT_CHARS:,}, since each one is sent with every prompt.",
            hint="Shorten it, or attach the document with chat -f FILE instead.",
        )
    return cleaned


class ProjectMemory:
    """The facts file of one home."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / FILE_NAME

    def facts(self) -> list[Fact]:
        """Every fact, oldest first; none when the file does not exist yet."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"Cannot read project memory {self.path}: {exc}.") from None
        out = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                out.append(Fact(str(row["id"]), str(row["text"]), row.get("collection"),
                                str(row["created_at"]), row.get("important") is True))  # fmt: skip
            except (ValueError, KeyError, TypeError):
                raise InvalidInput(
                    f"Project memory {self.path}, line {number}, is not a fact record.",
                    hint="Fix or remove that line (one JSON object a line).",
                ) from None
        return out

    def facts_for(self, collection: str | None) -> list[Fact]:
        """The facts a chat on `collection` is given: the global ones and its own."""
        return [f for f in self.facts() if f.collection in (None, collection)]

    def add(self, text: str, collection: str | None = None,
            important: bool = False) -> tuple[Fact, bool]:  # fmt: skip
        """Store a fact (the same text in the same scope is stored once, and marked
        important when asked again with `important`); returns it and whether it is new."""
        text = clean_text(text)
        with self._locked():
            facts = self.facts()
            for i, fact in enumerate(facts):
                if fact.text == text and fact.collection == collection:
                    if important and not fact.important:
                        facts[i] = fact = replace(fact, important=True)
                        self._write(facts)
                    return fact, False
            fact = Fact(new_id(), text, collection, _now(), important)
            self._write([*facts, fact])
        return fact, True

    def remove(self, *references: str) -> list[Fact]:
        """Delete the facts named by their ids or unique prefixes: all or none, so a
        typo in the second id never leaves the first one half-done."""
        with self._locked():
            facts = self.facts()
            gone = list({f.id: f for f in (_resolve(facts, r) for r in references)}.values())
            ids = {f.id for f in gone}
            self._write([f for f in facts if f.id not in ids])
        return gone

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.home / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _write(self, facts: list[Fact]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".memory-", suffix=".tmp", dir=self.home)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for fact in facts:
                    row = fact.to_record()
                    del row["type"]
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def _resolve(facts: list[Fact], reference: str) -> Fact:
    prefix = normalize_prefix(reference.strip()) if reference.strip() else None
    matches = [f for f in facts if prefix is not None and f.id.startswith(prefix)]
    if not matches:
        raise NotFound(f"no fact in project memory has an id starting with {reference!r}.",
                       hint="`localgpt memory list` shows them.")
    if len(matches) > 1:
        raise AmbiguousId(
            f"fact id {reference!r} is ambiguous: {'; '.join(f.id for f in matches[:10])}.",
            candidates=[f.id for f in matches[:10]], hint="Give more characters of the id.",
        )
    return matches[0]
