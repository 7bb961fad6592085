"""`localgpt chat`: one-shot questions, piped context, and the interactive REPL."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from localgpt_cli.cli.app import App, json_option, pass_app
from localgpt_cli.cli.kb import THRESHOLD
from localgpt_cli.errors import EXIT_INTERRUPTED, InvalidInput, NotFound, UsageError

EPILOG = """\b
Examples:
  localgpt chat "what does ENOSPC mean?"
  git diff | localgpt chat "write a commit message"
  echo "hi" | localgpt chat
  localgpt chat -m qwen3 --hide-thinking "prove that sqrt(2) is irrational"
  localgpt chat -o temperature 0 -o num_ctx 8192 "summarise" < notes.txt
  localgpt chat --json "hi" | jq -r 'select(.type=="token").payload'
  localgpt chat -c "and in Python?"          # continue the latest conversation
  localgpt chat --cid 01JD3 "go on"         # continue a given one (id prefix)
  localgpt chat -T calculator "what is 17% of 2,340?"
  localgpt chat --functions mytools.py "what's the weather in Oslo?"
  localgpt chat "how do I reset the VPN?"   # retrieves from ingested documents
  localgpt chat -f report.pdf --lock "summarise the findings"
  localgpt chat            # interactive: /new starts over, /exit quits
"""


def _stdin_text(app: App) -> str | None:
    """Piped stdin, if any: attached to the prompt as context.

    Read as bytes and decoded the way ingest decodes a file (rag/decode.py), so a Latin-1
    log or a UTF-16 export is text with a warning instead of a crash; bytes that are not
    text at all (a NUL byte: an executable, an image) are refused before anything is
    sent or stored, since the model could only answer about mojibake.
    """
    from localgpt_cli.rag.decode import decode_text
    from localgpt_cli.rag.filetypes import SNIFF_BYTES, looks_binary

    stream = sys.stdin
    if stream is None or stream.closed:
        return None
    try:
        if stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    data = stream.buffer.read(SNIFF_BYTES)  # `cat /dev/zero |` is refused, not read forever
    if looks_binary(data):
        raise InvalidInput(
            f"stdin is binary (a NUL byte in its first {SNIFF_BYTES // 1024} KiB), not text; "
            "nothing was sent.",
            hint="Pipe text, or attach a document with -f FILE.",
        )
    text, warning = decode_text(data + stream.buffer.read())
    if warning:
        app.output.warn("stdin_encoding", f"stdin: {warning}")
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
@click.option("-c", "--continue", "continue_", is_flag=True,
              help="Continue the latest conversation.")
@click.option("--cid", metavar="ID", help="Continue this conversation (a unique id prefix).")
@click.option("--no-save", is_flag=True, help="Do not store this exchange in the history.")
@click.option("--window", type=click.IntRange(min=0), metavar="N",
              help="History messages to send along (default 20).")
@click.option("--tools/--no-tools", default=True,
              help="Let the model call tools (default: when it can).")
@click.option("-T", "--tool", "only_tools", multiple=True, metavar="NAME",
              help="Offer only this tool (repeatable).")
@click.option("--functions", multiple=True, type=click.Path(exists=True, dir_okay=False),
              metavar="FILE", help="Python file whose functions become tools (repeatable).")
@click.option("--max-iterations", type=click.IntRange(min=1), default=10, show_default=True,
              help="Most model calls in one turn of the tool loop.")
@click.option("--approve", is_flag=True, help="Ask y/n on the terminal before each tool call.")
@click.option("--rag/--no-rag", default=None,
              help="Retrieve from the knowledge base (default: when the collection has documents).")
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True,
              help="Excerpts to retrieve.")
@click.option("--threshold", type=THRESHOLD, metavar="COSINE",
              help="Minimum similarity of a retrieved excerpt [default: 0.3].")
@click.option("-C", "--collection", metavar="NAME", help="Knowledge-base collection.")
@click.option("-f", "--file", "files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              metavar="PATH", help="Put a whole file into the context (repeatable).")
@click.option("--lock", is_flag=True, help="Use only the --file files: no retrieval.")
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
    continue_: bool,
    cid: str | None,
    no_save: bool,
    window: int | None,
    tools: bool,
    only_tools: tuple[str, ...],
    functions: tuple[str, ...],
    max_iterations: int,
    approve: bool,
    rag: bool | None,
    k: int,
    threshold: float | None,
    collection: str | None,
    files: tuple[str, ...],
    lock: bool,
) -> None:
    """Ask a model. With no PROMPT and a terminal, start an interactive chat.

    Piped stdin is attached to the prompt as context. Output: the answer as Markdown
    on a terminal, the plain answer text when piped, StreamPackets with --json.
    """
    from localgpt_cli.llm.options import parse_options

    if continue_ and cid:
        raise UsageError("Use either -c/--continue or --cid, not both.")
    app.set_flag("model", model)
    app.set_flag("timeout", timeout)
    app.set_flag("window", window)
    app.set_flag("collection", collection)
    if lock and not files:
        raise UsageError("--lock uses only the files named with -f/--file; name at least one.")
    parsed = parse_options(options)
    attached = [read_context_file(p) for p in files]
    text = " ".join(prompt).strip()
    stdin_text = _stdin_text(app)
    store = app.history(readonly=no_save) if not no_save or continue_ or cid else None
    conversation = None
    if continue_ or cid:
        conversation = None if store is None else store.resolve(cid) if cid else store.latest()
        if conversation is None:
            raise NotFound("There is no conversation to continue yet.",
                           hint="Start one with: localgpt chat \"…\"")
    chosen = app.settings.model
    if conversation is not None and app.settings.sources["model"] == "default":
        chosen = conversation.model  # continuing keeps the conversation's model
    chosen = app.catalog.resolve(chosen, app.output.warn)  # qwen3 -> the one qwen3:* installed
    base: dict[str, Any] = {
        "model": chosen,
        "system": system or app.settings.system,
        "options": parsed,
        "think": think,
        "stream": not no_stream,
        "save": not no_save,
        "window": app.settings.window,
        "conversation_id": conversation.id if conversation else None,
        "max_iterations": max_iterations,
        "files": attached,
    }
    # --lock, or neither retrieval nor tools: the knowledge base is not opened at all
    from localgpt_cli.cli.retrieval import knowledge_base

    has_kb = not lock and (rag is not False or tools) and knowledge_base(app, rag)
    retriever = None
    if has_kb and rag is not False:
        from localgpt_cli.cli.retrieval import chat_retriever

        retriever = chat_retriever(app, k=k, threshold=threshold,
                                   collection=app.settings.collection)
    toolbox = None
    if tools:
        from localgpt_cli.cli.retrieval import tool_search
        from localgpt_cli.cli.toolbox import build_toolbox

        toolbox = build_toolbox(app, only=only_tools, functions=functions, approve=approve,
                                search=tool_search(app) if has_kb else None)
    if text or stdin_text:
        request = base | {"prompt": text, "stdin_text": stdin_text}
        sys.exit(run_turn(app, request, hide_thinking, store, toolbox, retriever).code)
    if not sys.stdin.isatty():
        raise UsageError("Nothing to ask: give a prompt or pipe text into localgpt chat.")
    from localgpt_cli.cli.repl import run_repl

    run_repl(app, base, hide_thinking, store, toolbox, retriever)


@dataclass
class TurnOutcome:
    code: int
    conversation_id: str | None


def read_context_file(path: str) -> Any:
    """A --file as text: PDFs, DOCX and HTML through the same parsers as ingest."""
    from localgpt_cli.kernel.grounding import ContextFile
    from localgpt_cli.rag.parse import parse_file

    doc = parse_file(Path(path))
    return ContextFile(path=path, text="\n\n".join(s.text for s in doc.sections))


def run_turn(app: App, request: dict[str, Any], hide_thinking: bool,
             store: Any = None, toolbox: Any = None, retriever: Any = None) -> TurnOutcome:
    """Run one turn through a renderer; the exit code is 130 when interrupted."""
    from localgpt_cli.kernel.session import Turn, TurnRequest
    from localgpt_cli.render.chat import chat_renderer

    turn = Turn(app.client, app.catalog, TurnRequest(**request), store=store,
                toolbox=toolbox, retriever=retriever, warn=app.output.warn)
    renderer = chat_renderer(app.output, hide_thinking)
    try:
        for packet in turn:
            renderer.packet(packet)
    except KeyboardInterrupt:
        for packet in turn.abort():
            renderer.packet(packet)
        renderer.close()
        return TurnOutcome(EXIT_INTERRUPTED, turn.conversation_id)
    except BrokenPipeError:
        # The reader of stdout left (`| head -1`): stop the model and store the answer as
        # far as it got (`aborted`, or as it ended if `done` came first); main.py exits 141.
        turn.abort()
        raise
    renderer.close()
    if turn.error is not None:
        if app.output.json:
            sys.stderr.write(f"localgpt: error: {turn.error}\n")
        return TurnOutcome(turn.error.exit_code, turn.conversation_id)
    return TurnOutcome(0, turn.conversation_id)
