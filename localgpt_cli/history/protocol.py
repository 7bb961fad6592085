"""The history store protocol: what the kernel and the commands ask of a history backend.

`SQLiteStore` (history/sqlite.py, the default), `MemoryStore` (memory.py: `--no-save`,
`history.backend = "memory"`) and `PostgresStore` (postgres.py: `history.url`) implement
it, and `App.history()` (cli/app.py) picks one; the history tests run on all three. The
protocol holds only what the callers use.

How a turn is meant to be stored (the kernel's side of the contract):
1. `add_message(cid, "user", text)` before the model is called (`start_conversation`
   for the first question of a new conversation);
2. when `done` arrives, whatever its reason, `add_message(cid, "assistant", answer,
   thinking=..., tool_calls=..., metadata={"done_reason": reason, "usage": ...},
   reply_to=question_id)`; tool steps are stored the same way, with the same reply_to.
   `done` is always emitted, also after Ctrl-C or an error, so an aborted or failed
   answer is stored with what had streamed so far and marked by `done_reason`.

A backend raises only `localgpt_cli.errors` (NotFound, AmbiguousId, InvalidInput,
LockBusy, ...), so the commands' exit codes do not depend on where history is kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any, Protocol

from localgpt_cli.history.types import Conversation, ConversationSummary, Message, SearchHit


class Store(Protocol):
    """Conversations and their messages: create, append, find, list, search, export, delete."""

    def create_conversation(
        self, model: str, title: str | None = None, metadata: dict[str, Any] | None = None
    ) -> Conversation:
        """A new, empty conversation. Without a title, its first user message names it."""
        ...

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
        """Append a message to a conversation (a full id), stored when this returns;
        `reply_to`: the id of the question an answer or tool step answers."""
        ...

    def start_conversation(
        self, model: str, content: str, *, metadata: dict[str, Any] | None = None
    ) -> Message:
        """A new conversation and its first user message, stored together or not at all
        (a process killed in between must not leave an empty conversation as `latest`)."""
        ...

    def keep_image(self, message_id: str, sha256: str, media_type: str, data: bytes) -> None:
        """Keep a picture's bytes beside the message that sent it (history.keep_images;
        the message's metadata `images` always has its hash and size). Deleted with it."""
        ...

    def update_metadata(self, message_id: str, changes: dict[str, Any]) -> Message:
        """Merge `changes` into a message's metadata; a None value removes that key.

        The rest of the message is unchanged. NotFound for an unknown message id.
        """
        ...

    def import_conversation(self, conversation: Conversation, messages: Sequence[Message],
                            *, replace: bool = False) -> int:  # fmt: skip
        """Store an exported conversation under its own ids (`history import`); returns
        how many messages were written, so importing the same export twice writes
        nothing. A message that says something else than its stored copy is an
        ImportConflict (transfer.py), the conversation unchanged, unless `replace`."""
        ...

    def get(self, conversation_id: str) -> Conversation:
        """The conversation with exactly this id (NotFound otherwise)."""
        ...

    def get_message(self, message_id: str) -> Message:
        """The message with exactly this id (NotFound otherwise)."""
        ...

    def resolve_message(self, reference: str) -> Message:
        """The message named by a full id or a unique prefix of one (resolve.py's rule:
        NotFound, or AmbiguousId listing the candidates)."""
        ...

    def latest(self) -> Conversation | None:
        """The most recently updated conversation (what `chat -c` continues), if any."""
        ...

    def resolve(self, reference: str) -> Conversation:
        """The conversation named by a full id, a unique prefix of one, or `latest`."""
        ...

    def list_conversations(self, limit: int = 20, offset: int = 0) -> list[ConversationSummary]:
        """Conversations, most recently updated first."""
        ...

    def messages(self, conversation_id: str, *, last: int | None = None) -> list[Message]:
        """The messages of a conversation in order; with `last`, only the last N."""
        ...

    def search(
        self, text: str, limit: int = 20, *, highlight: tuple[str, str] = ("**", "**")
    ) -> list[SearchHit]:
        """Messages containing all the words of `text`, best match first."""
        ...

    def export(self, conversation_id: str, format: str = "json") -> str:
        """The whole conversation as a JSON document or as Markdown."""
        ...

    def delete(self, conversation_ids: Iterable[str]) -> int:
        """Delete conversations (full ids), all or nothing; returns how many."""
        ...

    def prune(self, older_than: timedelta) -> int:
        """Delete the conversations not updated within `older_than`; returns how many."""
        ...

    def close(self) -> None:
        """Release the store; it is not used afterwards."""
        ...
