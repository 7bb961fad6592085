"""Reading exported conversations back (`history import`), to move them between backends.

`history export --json` writes `export` records whose `content` is a JSON document
(export.py's `document`); `history export ID > chat.json` writes the document itself,
and `history export > all.jsonl` one compact document per line. All three are read
here, whole, before anything is stored: a damaged input is refused naming the line,
with nothing imported.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from localgpt_cli.errors import InvalidInput, PartialFailure
from localgpt_cli.history.schema import ROLES
from localgpt_cli.history.types import Conversation, Message

Exported = tuple[Conversation, list[Message]]


class ImportConflict(PartialFailure):
    """An exported message has the id of a stored one but says something else; without
    --replace the conversation is left as it is (`history import` goes on with the rest
    and exits 5)."""

    code = "import_conflict"


def _differs(stored: Message, exported: Message) -> bool:
    """What a message says (not its marks: metadata gains `important` after the fact)."""
    return (stored.role, stored.content, stored.thinking, stored.tool_calls) != (
        exported.role, exported.content, exported.thinking, exported.tool_calls)


def changes(
    conversation: Conversation, messages: Sequence[Message], have: dict[int, Message],
    *, replace: bool = False, elsewhere: Collection[str] = (),
) -> tuple[list[Message], list[Message]]:
    """(new, replaced): the exported messages a backend lacks and, with `replace`, those
    whose stored copy (`have`: seq -> message of the conversation) says something else;
    each in seq order. One rule for every backend, so an export moves between them the
    same way: a message already there as it is exported is skipped (importing twice adds
    nothing); a seq taken by another message, or a message of another conversation, is
    InvalidInput; a message whose content differs is an ImportConflict unless `replace`,
    and so is one whose id is stored in another conversation (`elsewhere`), always.
    Every refusal leaves the whole conversation as it was."""
    new: list[Message] = []
    replaced: list[Message] = []
    for m in sorted(messages, key=lambda m: m.seq):
        stored = have.get(m.seq)
        if stored is not None and stored.id == m.id:
            if _differs(stored, m):
                replaced.append(m)
            continue
        if stored is not None or m.conversation_id != conversation.id:
            raise InvalidInput(
                f"cannot import conversation {conversation.id}: its message {m.seq} differs "
                f"from the stored one ({stored.id if stored else None} here, {m.id} in the "
                "export); nothing of it was imported."
            )
        new.append(m)
    moved = [m.id for m in new if m.id in elsewhere]
    if moved:
        raise ImportConflict(
            f"conversation {conversation.id}: message {moved[0]} of the export is stored in "
            "another conversation; it was left unchanged.",
            hint="Export that conversation again from the history it came from.")
    if replaced and not replace:
        first, more = replaced[0], len(replaced) - 1
        which = f"message {first.id} (seq {first.seq})" + (f" and {more} more" if more else "")
        raise ImportConflict(
            f"conversation {conversation.id}: {which} of the export "
            f"{'differ' if more else 'differs'} from the stored copy; it was left unchanged.",
            hint="`history import --replace` overwrites them with the export's.",
        )
    return new, replaced


def read_exports(text: str, where: str = "stdin") -> list[Exported]:
    """Every conversation in `text` (one document, or one document or export record per
    line), in order; InvalidInput naming `where` and the line for anything else."""
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if whole is not None:
        return [_conversation(_document(whole, where, 1), where, 1)]
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise InvalidInput(
                f"{where} line {number} is not JSON: {exc}; nothing imported.",
                hint="Pipe the output of `localgpt history export --json`.",
            ) from None
        out.append(_conversation(_document(value, where, number), where, number))
    return out


def _document(value: Any, where: str, line: int) -> dict[str, Any]:
    """The export document a JSON value is or carries (an `export` record's content)."""
    if isinstance(value, dict) and value.get("type") == "export":
        if value.get("format") != "json" or not isinstance(value.get("content"), str):
            kind = f"a {value['format']} export" if value.get("format") else "an export record"
            raise InvalidInput(
                f"{where} line {line} is {kind} without its content; "
                "only JSON exports to stdout can be imported; nothing imported.",
                hint="Use `localgpt history export --json` (no -o, no --format markdown).")
        try:
            value = json.loads(value["content"])
        except ValueError:
            value = None
    if not isinstance(value, dict) or "conversation" not in value or "messages" not in value:
        raise InvalidInput(f"{where} line {line} is not an exported conversation; "
                           "nothing imported.",
                           hint="Pipe the output of `localgpt history export --json`.")
    return value


def _conversation(document: dict[str, Any], where: str, line: int) -> Exported:
    """The Conversation and Messages of one document, checked field by field."""
    try:
        c = document["conversation"]
        conversation = Conversation(
            str(c["id"]), c["title"], str(c["model"]), 0, str(c["created_at"]),
            str(c["updated_at"]), dict(c.get("metadata") or {}))  # fmt: skip
        messages = [
            Message(str(m["id"]), str(m["conversation_id"]), int(m["seq"]), m["role"],
                    str(m["content"]), m["thinking"], m["tool_calls"], m["tool_name"],
                    m["tool_call_id"], dict(m["metadata"] or {}), str(m["created_at"]),
                    m.get("reply_to"))
            for m in document["messages"]
        ]  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(f"{where} line {line}: the exported conversation lacks or "
                           f"mistypes {exc}; nothing imported.") from None
    for m in messages:
        _mark_imported(m.metadata)
    bad = [m.role for m in messages if m.role not in ROLES]
    if bad:
        raise InvalidInput(f"{where} line {line}: unknown role {bad[0]!r}; nothing imported.")
    return conversation, messages


def _mark_imported(metadata: dict[str, Any]) -> None:
    """A preview that arrives by import says so, whatever the file claimed: `apply`
    refuses it without --trust-imported, as anyone could have written the file."""
    preview = metadata.get("preview")
    if isinstance(preview, dict):
        metadata["preview"] = {**preview, "imported": True}
