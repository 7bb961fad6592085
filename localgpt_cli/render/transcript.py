"""A stored conversation as a transcript for people (`history show`): plain text or rich.

Thinking is folded into one line unless asked for, tool calls are shown as
`name(args) -> result` under the message that made them, and an answer that did not end
normally says so. In a pipe the transcript is plain Markdown-like text; on a terminal
assistant answers are rendered as Markdown.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from localgpt_cli.history.types import image_lines
from localgpt_cli.render.history import title
from localgpt_cli.render.tables import local_time

if TYPE_CHECKING:
    from localgpt_cli.history.types import Conversation, Message
    from localgpt_cli.render.output import Output

# done reasons that mean the answer did not end normally.
_UNFINISHED = ("length", "max_iterations", "loop_guard", "aborted", "error")
_STYLES = {"user": "bold green", "assistant": "bold cyan", "system": "bold magenta",
           "tool": "bold yellow"}


def print_transcript(
    output: Output, conversation: Conversation, messages: list[Message], thinking: bool
) -> None:
    """The whole conversation: rich on a terminal, plain text in a pipe."""
    if output.pretty:
        _show_pretty(output, conversation, messages, thinking)
    else:
        _show_plain(output, conversation, messages, thinking)


def _call_parts(call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Name and arguments of a stored tool call (Ollama's {"function": {...}} or flat)."""
    function = call.get("function", call)
    if not isinstance(function, dict):
        return "?", {"call": call}
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):
            arguments = json.loads(arguments)
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    return str(function.get("name", "?")), arguments


def _tool_lines(messages: list[Message]) -> tuple[dict[str, list[str]], set[str]]:
    """`name(args) -> result` for each assistant tool call, and the tool messages used.

    A call's result is the following tool message with its call id, or else the next
    unused one in order (Ollama's tool messages often carry only a name). Tool messages
    used here are not shown again on their own.
    """
    from localgpt_cli.render.chat import tool_line

    lines: dict[str, list[str]] = {}
    used: set[str] = set()
    for i, message in enumerate(messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        results: list[Message] = []
        for later in messages[i + 1:]:
            if later.role != "tool":
                break
            results.append(later)
        out = []
        for call in message.tool_calls:
            name, arguments = _call_parts(call)
            call_id = call.get("id")
            match = next((r for r in results if r.id not in used and call_id
                          and r.tool_call_id == call_id), None)
            if match is None:
                match = next((r for r in results if r.id not in used), None)
            if match is not None:
                used.add(match.id)
            out.append(tool_line(name, arguments, None if match is None else match.content))
            preview = match.metadata.get("preview") if match is not None else None
            if isinstance(preview, dict):  # what the user was shown, as it was shown
                from localgpt_cli.render.preview import plain_block

                out.append(plain_block(preview).rstrip("\n"))
        lines[message.id] = out
    return lines, used


def _folded(thinking: str) -> str:
    return f"thinking: {len(thinking):,} chars — use --thinking to show"


def _unfinished(message: Message) -> str | None:
    reason = message.metadata.get("done_reason")
    if reason not in _UNFINISHED:
        return None
    error = message.metadata.get("error")
    detail = f": {error['message']}" if isinstance(error, dict) and "message" in error else ""
    return f"(answer incomplete: {reason}{detail})"


def _heading(message: Message) -> str:
    if message.role == "tool" and message.tool_name:
        return f"tool: {message.tool_name}"
    provider, model = message.metadata.get("provider"), message.metadata.get("model")
    if message.role == "assistant" and provider and model:
        return f"assistant · {provider}:{model}"  # which server answered, message by message
    return message.role


def _show_plain(
    output: Output, conversation: Conversation, messages: list[Message], thinking: bool
) -> None:
    calls, used = _tool_lines(messages)
    parts = [
        f"# {title(conversation.title)}\n"
        f"id: {conversation.id}  model: {conversation.model}  "
        f"messages: {conversation.messages}  updated: {conversation.updated_at}\n"
    ]
    for m in messages:
        if m.id in used:
            continue
        block = [f"## {_heading(m)}"]
        if m.thinking:
            if thinking:
                block.append("thinking:")
                block.extend(f"> {line}" if line else ">" for line in m.thinking.splitlines())
            else:
                block.append(_folded(m.thinking))
        if m.content:
            block.append(m.content.rstrip("\n"))
        block.extend(image_lines(m))
        block.extend(calls.get(m.id, []))
        note = _unfinished(m)
        if note:
            block.append(note)
        parts.append("\n".join(block) + "\n")
    output.stdout.write("\n".join(parts))
    output.stdout.flush()


def _show_pretty(
    output: Output, conversation: Conversation, messages: list[Message], thinking: bool
) -> None:
    from rich.markdown import Markdown
    from rich.rule import Rule
    from rich.text import Text

    console = output.console()
    calls, used = _tool_lines(messages)
    console.print(Text(title(conversation.title), style="bold"))
    console.print(Text(
        f"{conversation.id} · {conversation.model} · {conversation.messages} messages · "
        f"updated {local_time(conversation.updated_at)}", style="dim"))
    for m in messages:
        if m.id in used:
            continue
        console.print()
        console.print(Rule(Text(f" {_heading(m)} ", style=_STYLES.get(m.role, "bold")),
                           align="left", style="dim"))
        if m.thinking:
            if thinking:
                console.print(Text(m.thinking, style="dim italic"))
            else:
                console.print(Text(_folded(m.thinking), style="dim"))
        if m.content:
            if m.role == "assistant":
                console.print(Markdown(m.content))
            else:
                console.print(Text(m.content))
        for line in image_lines(m):
            console.print(Text(line, style="dim"))
        for line in calls.get(m.id, []):
            console.print(Text(line, style="yellow"))
        note = _unfinished(m)
        if note:
            console.print(Text(note, style="red"))
