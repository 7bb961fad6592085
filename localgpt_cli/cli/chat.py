"""`localgpt chat`: one-shot questions, piped context, and the interactive REPL."""

from __future__ import annotations

import sys
from typing import Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.errors import EXIT_INTERRUPTED, UsageError

EPILOG = """\b
Examples:
  localgpt chat "what does ENOSPC mean?"
  git diff | localgpt chat "write a commit message"
  echo "hi" | localgpt chat
  localgpt chat -m qwen3 --hide-thinking "prove that sqrt(2) is irrational"
  localgpt chat -o temperature 0 -o num_ctx 8192 "summarise" < notes.txt
  localgpt chat --json "hi" | jq -r 'select(.type=="token").payload'
  localgpt chat            # interactive: /new starts over, /exit quits
"""


def _stdin_text() -> str | None:
    """Piped stdin, if any: attached to the prompt as context."""
    stream = sys.stdin
    if stream is None or stream.closed:
        return None
    try:
        if stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    text = stream.read()
    return text if text.strip() else None


@click.command(epilog=EPILOG)
@click.argument("prompt", nargs=-1)
@click.option("-m", "--model", help="Chat model (default: LOCALGPT_MODEL or config).")
@click.option("-s", "--system", help="System prompt.")
@click.option(
    "-o",
    "--option",
    "options",
    type=(str, str),
    multiple=True,
    metavar="KEY VALUE",
    help="Model option, repeatable: temperature, num_ctx, seed, top_p, stop, ...",
)
@click.option(
    "--think/--no-think",
    default=None,
    help="Ask the model to reason first (default: when the model can).",
)
@click.option("--hide-thinking", is_flag=True, help="Do not show the model's reasoning.")
@click.option("--no-stream", is_flag=True, help="Wait for the whole answer before writing.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Give up when Ollama does not answer in time.")
@json_option
@pass_app
def chat(
    app: App,
    prompt: tuple[str, ...],
    model: str | None,
    system: str | None,
    options: tuple[tuple[str, str], ...],
    think: bool | None,
    hide_thinking: bool,
    no_stream: bool,
    timeout: float | None,
) -> None:
    """Ask a model. With no PROMPT and a terminal, start an interactive chat.

    Piped stdin is attached to the prompt as context. Output: the answer as Markdown
    on a terminal, the plain answer text when piped, StreamPackets with --json.
    """
    from localgpt_cli.llm.options import parse_options

    app.set_flag("model", model)
    app.set_flag("timeout", timeout)
    parsed = parse_options(options)
    text = " ".join(prompt).strip()
    stdin_text = _stdin_text()
    base: dict[str, Any] = {
        "model": app.settings.model,
        "system": system or app.settings.system,
        "options": parsed,
        "think": think,
        "stream": not no_stream,
    }
    if text or stdin_text:
        code = run_turn(app, base | {"prompt": text, "stdin_text": stdin_text}, hide_thinking)
        sys.exit(code)
    if not sys.stdin.isatty():
        raise UsageError("Nothing to ask: give a prompt or pipe text into localgpt chat.")
    from localgpt_cli.cli.repl import run_repl

    run_repl(app, base, hide_thinking)


def run_turn(
    app: App,
    request: dict[str, Any],
    hide_thinking: bool,
    history: list[dict[str, Any]] | None = None,
) -> int:
    """Run one turn through a renderer; return the exit code (130 when interrupted)."""
    from localgpt_cli.kernel.session import Turn, TurnRequest
    from localgpt_cli.render.chat import chat_renderer

    turn = Turn(
        app.client,
        app.catalog,
        TurnRequest(**request),
        history=history,
        warn=app.output.warn,
    )
    renderer = chat_renderer(app.output, hide_thinking)
    try:
        for packet in turn:
            renderer.packet(packet)
    except KeyboardInterrupt:
        for packet in turn.abort():
            renderer.packet(packet)
        renderer.close()
        return EXIT_INTERRUPTED
    renderer.close()
    if history is not None and turn.error is None:
        history.append({"role": "user", "content": turn.request.user_content()})
        history.append({"role": "assistant", "content": turn.answer})
    if turn.error is not None:
        if app.output.json:
            sys.stderr.write(f"localgpt: error: {turn.error}\n")
        return turn.error.exit_code
    return 0
