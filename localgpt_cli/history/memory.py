"""MemoryStore: the `Store` protocol kept in this process's memory, nothing on disk.

What `chat --no-save` and `history.backend = "memory"` use: the conversation is whole
for the life of the process (the REPL remembers every earlier turn, the context
window chooses from all of them), and nothing is written anywhere. It follows the
SQLite store's rules (seqs, titles, ids, prefixes, search, prune, export), so the
kernel cannot tell the two apart; the shared history tests run against it too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from dataclasses import replace as replace_
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import orjson

from localgpt_cli.errors import InvalidInput, NotFound, UsageError
from localgpt_cli.history import export as _export
from localgpt_cli.history import resolve as _resolve
from localgpt_cli.history import search as _search
from localgpt_cli.history import textsearch
from localgpt_cli.history.rows import iso, title_from
from localgpt_cli.history.schema import ROLES
from localgpt_cli.history.transfer import changes
from localgpt_cli.history.types import Conversation, ConversationSummary, Message, SearchHit
from localgpt_cli.ids import new_id

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store

Clock = Callable[[], datetime]


def _copy(value: Any) -> Any:
    """A deep copy through JSON: what goes in comes out as SQLite would hand it back."""
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


@dataclass
class _Conversation:
    head: Conversation
    messages: list[Message] = field(default_factory=list)
    words: list[list[str]] = field(default_factory=list)  # folded words, per message


class MemoryStore:
    """Conversations and messages in a dict; calls are serialised (usable from threads)."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._lock = threading.RLock()
        self._conversations: dict[str, _Conversation] = {}
        self._order = 0  # insertion order of messages, newest highest (search's window)
        self._messages: dict[str, tuple[str, int]] = {}  # message id -> (cid, order)
        self.images: dict[tuple[str, str], tuple[str, bytes]] = {}  # keep_image's

    def close(self) -> None:
        """Nothing to release: the conversations live as long as the store object."""

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------

    def create_conversation(
        self, model: str, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Conversation:
        """A new, empty conversation. Without a title, its first user message names it."""
        title = (title or "").strip() or None
        with self._lock:
            now = iso(self._clock())
            head = Conversation(new_id(), title, model, 0, now, now, _copy(metadata or {}))
            self._conversations[head.id] = _Conversation(head)
        return head

    def add_message(
        self,
        conversation_id: str,
        role: str,
        content: str,
        *,
        thinking: str | None = None,
        tool_calls: list[dict[str, Any]] | None = None,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        metadata: dict[str, Any] | None = None,
        reply_to: str | None = None,
    ) -> Message:
        """Append a message (next seq), as SQLiteStore.add_message does."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        with self._lock:
            conv = self._require(conversation_id)
            now = iso(self._clock())
            calls = None if tool_calls is None else _copy(tool_calls)
            seq = conv.messages[-1].seq + 1 if conv.messages else 0
            message = Message(new_id(), conversation_id, seq, role, content,
                              thinking, calls, tool_name, tool_call_id, _copy(metadata or {}),
                              now, reply_to)  # fmt: skip
            conv.messages.append(message)
            conv.words.append(textsearch.words(content))
            self._order += 1
            self._messages[message.id] = (conversation_id, self._order)
            title = conv.head.title
            if title is None and role == "user":
                title = title_from(content)
            conv.head = replace(conv.head, title=title, updated_at=now,
                                messages=len(conv.messages))
        return message

    def start_conversation(
        self, model: str, content: str, *, metadata: dict[str, Any] | None = None
    ) -> Message:
        """A new conversation with its first user message (one step, as in SQLite)."""
        with self._lock:
            conversation = self.create_conversation(model)
            return self.add_message(conversation.id, "user", content, metadata=metadata)

    def keep_image(self, message_id: str, sha256: str, media_type: str, data: bytes) -> None:
        """history.keep_images: a picture's bytes, for as long as this process runs."""
        with self._lock:
            self.get_message(message_id)  # NotFound, as the other stores
            self.images[(message_id, sha256)] = (media_type, data)

    def update_metadata(self, message_id: str, changes: dict[str, Any]) -> Message:
        """Merge `changes` into a message's metadata (a None value removes the key)."""
        with self._lock:
            message = self.get_message(message_id)
            conv = self._conversations[message.conversation_id]
            metadata = _copy(_resolve.merged_metadata(message.metadata, changes))
            updated = replace(message, metadata=metadata)
            at = next(i for i, m in enumerate(conv.messages) if m.id == message_id)
            conv.messages[at] = updated
        return updated

    def import_conversation(self, conversation: Conversation, messages: Sequence[Message],
                            *, replace: bool = False) -> int:  # fmt: skip
        """Store an exported conversation under its ids; returns how many messages were
        written (the rule of transfer.changes: twice writes nothing, a taken seq or a
        message that says something else is a conflict)."""
        with self._lock:
            conv = self._conversations.get(conversation.id)
            have = {m.seq: m for m in conv.messages} if conv else {}
            elsewhere = {m.id for m in messages
                         if self._messages.get(m.id, (conversation.id,))[0] != conversation.id}
            new, replaced = changes(conversation, messages, have, replace=replace,
                                    elsewhere=elsewhere)  # fmt: skip
            if conv is not None and replaced:
                swap = {m.id: replace_(m, metadata=_copy(m.metadata)) for m in replaced}
                conv.messages = [swap.get(m.id, m) for m in conv.messages]
            if conv is None:
                head = replace_(conversation, messages=0, metadata=_copy(conversation.metadata))
                conv = self._conversations[head.id] = _Conversation(head)
            for m in new:
                self._order += 1
                self._messages[m.id] = (m.conversation_id, self._order)
            merged = sorted([*conv.messages, *(replace_(m, metadata=_copy(m.metadata))
                                               for m in new)], key=lambda m: m.seq)
            conv.messages = merged
            conv.words = [textsearch.words(m.content) for m in merged]
            if new:
                conv.head = replace_(conv.head, messages=len(merged), title=conv.head.title
                                    or conversation.title,
                                    updated_at=max(conv.head.updated_at, conversation.updated_at))
        return len(new) + len(replaced)

    def delete(self, conversation_ids: Iterable[str]) -> int:
        """Delete conversations (full ids), all or nothing; returns how many."""
        ids = list(dict.fromkeys(conversation_ids))
        with self._lock:
            missing = [cid for cid in ids if cid not in self._conversations]
            if missing:
                raise NotFound(f"no conversation has id {', '.join(missing)}; nothing deleted.")
            for cid in ids:
                for message in self._conversations.pop(cid).messages:
                    del self._messages[message.id]
        return len(ids)

    def prune(self, older_than: timedelta) -> int:
        """Delete the conversations not updated within `older_than`; returns how many."""
        if older_than < timedelta(0):
            raise InvalidInput(f"prune needs a positive age, not {older_than}.")
        with self._lock:
            cutoff = iso(self._clock() - older_than)
            old = [c.head.id for c in self._conversations.values() if c.head.updated_at < cutoff]
            return self.delete(old)

    # -- reading ------------------------------------------------------------------

    def get(self, conversation_id: str) -> Conversation:
        """The conversation with exactly this id (NotFound otherwise)."""
        with self._lock:
            return self._require(conversation_id).head

    def get_message(self, message_id: str) -> Message:
        """The message with exactly this id (NotFound otherwise)."""
        with self._lock:
            if message_id not in self._messages:
                raise NotFound(f"no message has id {message_id!r}.")
            cid, _ = self._messages[message_id]
            return next(m for m in self._conversations[cid].messages if m.id == message_id)

    def latest(self) -> Conversation | None:
        """The most recently updated conversation, if any."""
        newest = self.list_conversations(limit=1)
        return self.get(newest[0].id) if newest else None

    def resolve(self, reference: str) -> Conversation:
        """The conversation named by a full id, a unique prefix of one, or `latest`."""
        return _resolve.resolve(
            reference, latest=self.latest, starting_with=self._starting_with, get=self.get
        )

    def _starting_with(self, prefix: str, limit: int) -> list[ConversationSummary]:
        with self._lock:
            ids = sorted((cid for cid in self._conversations if cid.startswith(prefix)),
                         reverse=True)[:limit]  # fmt: skip
            return [_summary(self._conversations[cid].head) for cid in ids]

    def resolve_message(self, reference: str) -> Message:
        """The message named by a full id or a unique prefix of one (resolve.py)."""
        return _resolve.resolve_message(reference, self._messages_starting_with)

    def _messages_starting_with(self, prefix: str, limit: int) -> list[Message]:
        with self._lock:
            ids = sorted((mid for mid in self._messages if mid.startswith(prefix)),
                         reverse=True)[:limit]  # fmt: skip
        return [self.get_message(mid) for mid in ids]

    def list_conversations(self, limit: int = 20, offset: int = 0) -> list[ConversationSummary]:
        """Conversations, most recently updated first."""
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must not be negative")
        with self._lock:
            heads = sorted((c.head for c in self._conversations.values()),
                           key=lambda h: (h.updated_at, h.id), reverse=True)  # fmt: skip
        return [_summary(h) for h in heads[offset : offset + limit]]

    def messages(self, conversation_id: str, *, last: int | None = None) -> list[Message]:
        """The messages of a conversation in seq order; with `last`, only the last N."""
        with self._lock:
            messages = list(self._require(conversation_id).messages)
        if last is None:
            return messages
        if last < 0:
            raise ValueError("last must not be negative")
        return messages[len(messages) - last :] if last else []

    def search(
        self, text: str, limit: int = 20, *, highlight: tuple[str, str] = ("**", "**")
    ) -> list[SearchHit]:
        """Messages holding all the words of `text`, best first, among the newest
        SEARCH_WINDOW matches (the SQLite store's rules, textsearch.py)."""
        if limit < 0:
            raise ValueError("limit must not be negative")
        phrases = textsearch.query_phrases(text)
        with self._lock:
            found = [(self._messages[m.id][1], m, conv.head.title, words)
                     for conv in self._conversations.values()
                     for m, words in zip(conv.messages, conv.words, strict=True)
                     if textsearch.matches(phrases, words)]  # fmt: skip
        found.sort(key=lambda f: f[0], reverse=True)
        found = found[: _search.SEARCH_WINDOW]
        found.sort(key=lambda f: (-textsearch.score(phrases, f[3]), -f[0]))
        return [
            SearchHit(rank, m.conversation_id, title, m.id, m.seq, m.role,
                      textsearch.snippet(m.content, phrases, highlight), m.created_at)
            for rank, (_, m, title, _) in enumerate(found[:limit], 1)
        ]  # fmt: skip

    def export(self, conversation_id: str, format: str = "json") -> str:
        """The whole conversation as a JSON document or as Markdown (see export.py)."""
        writers = {"json": _export.to_json, "markdown": _export.to_markdown}
        if format not in writers:
            raise UsageError(f"export format must be json or markdown, not {format!r}.")
        return writers[format](self.get(conversation_id), self.messages(conversation_id))

    def _require(self, conversation_id: str) -> _Conversation:
        conv = self._conversations.get(conversation_id)
        if conv is None:
            raise NotFound(
                f"no conversation has id {conversation_id!r}.",
                hint="`localgpt history` lists them.",
            )
        return conv


def _summary(head: Conversation) -> ConversationSummary:
    return ConversationSummary(head.id, head.title, head.model, head.messages,
                               head.created_at, head.updated_at)  # fmt: skip


if TYPE_CHECKING:
    _store: Store = MemoryStore()
