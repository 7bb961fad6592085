"""Files of questions, as `search --queries` and `eval` read them.

One question per line, either a JSON object `{"id": ..., "text": ...}` (BEIR's `_id` is
accepted for `id`, so published query files work as they are) or a plain line whose id is
its line number. A file is read whole and checked before any search runs: a bad line
stops the run with its line number instead of leaving half the answers on stdout.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.retrieve import has_words


@dataclass(frozen=True)
class Question:
    """One line of a query file."""

    id: str
    text: str
    line: int


def read_text(path: str, stdin_text: str | None = None) -> str:
    """The file's text (or stdin's for `-`), as UTF-8; unreadable input is InvalidInput."""
    if path == "-":
        return stdin_text or ""
    try:
        with open(path, "rb") as fh:
            return _utf8(fh.read(), path)
    except OSError as exc:
        raise InvalidInput(f"Cannot read {path}: {exc.strerror or exc}.") from exc


def read_stdin() -> str:
    """Standard input read whole, as a file named `-` is: UTF-8 or InvalidInput. Bytes,
    not the text layer, so the locale's encoding cannot turn them into an internal error."""
    import sys

    stream = getattr(sys.stdin, "buffer", None)  # sys.stdin is None when fd 0 is closed
    if stream is None:
        raise InvalidInput(
            "stdin is closed: nothing to read for '-'.", hint="Pipe the file in, or name it."
        )
    return _utf8(stream.read(), "<stdin>")


def _utf8(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start}).",
            hint="Convert it first, e.g. with iconv -t UTF-8.",
        ) from exc


def parse_questions(text: str, source: str) -> list[Question]:
    """Every question of a query file, in order; blank lines are skipped (and counted)."""
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        question = _parse_line(line, number, source)
        if question.id in seen:
            raise InvalidInput(
                f"{source}:{number}: query id {question.id!r} was already used on line "
                f"{seen[question.id]}.",
                hint="Give every query its own id.",
            )
        seen[question.id] = number
        questions.append(question)
    if not questions:
        raise InvalidInput(f"{source}: no queries (one per line, plain or JSON).")
    return questions


def _parse_line(line: str, number: int, source: str) -> Question:
    where = f"{source}:{number}"
    if not line.startswith("{"):
        return Question(str(number), line, number)
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{where}: not valid JSON ({exc.msg} at column {exc.colno}).",
            hint='Write {"id": "...", "text": "..."} or the question as plain text.',
        ) from exc
    if not isinstance(obj, dict):
        raise InvalidInput(f"{where}: expected a JSON object with \"text\".")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(f"{where}: the object has no non-empty \"text\" string.")
    qid = obj.get("id", obj.get("_id"))
    if qid is None:
        qid = number
    if isinstance(qid, bool) or not isinstance(qid, (str, int)) or str(qid).strip() == "":
        raise InvalidInput(f"{where}: \"id\" must be a non-empty string or an integer.")
    return Question(str(qid), text.strip(), number)


def require_words(questions: Sequence[Question], source: str) -> None:
    """Keyword search needs a word to match: name the first line that has none, rather
    than failing the whole run on it halfway through."""
    for q in questions:
        if not has_words(q.text):
            raise InvalidInput(
                f"{source}:{q.line}: the query {q.text!r} has no words to search for."
            )
