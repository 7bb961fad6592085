"""`localgpt chat`: one-shot questions, piped context, and the interactive REPL.

This module is the command's flags; cli/turn.py turns them into requests and runs them.
"""

from __future__ import annotations

import sys

import click

from localgpt_cli.cli.answer import answer_flags
from localgpt_cli.cli.app import App, Finite, json_option, pass_app, provider_option
from localgpt_cli.cli.chat_flags import ChatFlags
from localgpt_cli.cli.confirm import stdin_is_tty
from localgpt_cli.cli.kb import THRESHOLD
from localgpt_cli.cli.retrieval import THETA
from localgpt_cli.cli.structured_flags import structured_flags
from localgpt_cli.cli.template_flags import template_flags
from localgpt_cli.cli.turn import open_chat, pass_flags
from localgpt_cli.errors import UsageError

EPILOG = """\b
Examples:
  localgpt chat "what does ENOSPC mean?"
  git diff | localgpt chat "write a commit message"
  echo "hi" | localgpt chat
  localgpt chat -m qwen3 --hide-thinking "prove that sqrt(2) is irrational"
  localgpt chat -m work:deepseek-chat "hi"  # a [providers.work] profile
  localgpt chat --provider work "hi"        # the same, with its default_model
  localgpt chat -o temperature 0 -o num_ctx 8192 "summarise" < notes.txt
  localgpt chat --json "hi" | jq -j 'select(.type=="token").payload'
  localgpt chat -c "and in Python?"          # continue the latest conversation
  localgpt chat --cid 01JD3 "go on"         # continue a given one (id prefix)
  localgpt chat -T calculator "what is 17% of 2,340?"
  localgpt chat --functions mytools.py "what's the weather in Oslo?"
  localgpt chat "how do I reset the VPN?"   # retrieves from ingested documents
  localgpt chat -f report.pdf --lock "summarise the findings"
  localgpt chat -m gemma3 --image photo.jpg "what is on the shelf?"
  cat dialog.png | localgpt chat -m gemma3 "what does this error say?"
  localgpt chat -m gemma3 -f scan.pdf --pages 2-3 "transcribe the table"
  localgpt chat -m qwen3 --image receipt.png --ocr "what is the total?"  # its text, by Tesseract
  localgpt chat --explain --gate model "how do I reset the VPN?"
  localgpt chat -c --explain "what was the build server called?"
  cat ticket.txt | localgpt chat --schema 'title, severity int' "triage this"
  localgpt chat --schema-multi 'name, role' -f minutes.txt "who attended?" | jq -r '.[].name'
  localgpt chat --schema label --each classify < titles.txt | jq -r 'select(.value).value.label'
  localgpt chat --save triage -s "You triage tickets." --schema 'title, severity int'
  cat ticket.txt | localgpt chat -t triage          # later: the saved flags, this input
  localgpt chat -t summarize -P lang French < notes.txt
  localgpt chat            # interactive: /new, /remember, /tools, /model work:M, /exit
"""


@click.command(epilog=EPILOG)
@click.argument("prompt", nargs=-1)
@click.option("-m", "--model",
              help="Chat model (default: LOCALGPT_MODEL or config); NAME:MODEL picks a provider.")
@provider_option
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
@click.option("--timeout", type=Finite(min=0, min_open=True), metavar="SECONDS",
              help="Give up when the model's first token has not come within SECONDS "
                   "(default 600; between tokens: idle_timeout in config.toml, 120).")
@click.option("-c", "--continue", "continue_", is_flag=True,
              help="Continue the latest conversation.")
@click.option("--cid", metavar="ID", help="Continue this conversation (a unique id prefix).")
@click.option("--no-save", is_flag=True,
              help="Keep this chat in memory only (the REPL remembers it); nothing is written.")
@click.option("--window", type=click.IntRange(min=0), metavar="N",
              help="At most N earlier messages in the prompt (default 20).")
@click.option("--tools", "tools", metavar="GROUPS",
              help="Tool groups the model may use: GROUP,GROUP, all or none [default: all].")
@click.option("--no-tools", is_flag=True, help="No tools (same as --tools none).")
@click.option("-T", "--tool", "only_tools", multiple=True, metavar="NAME",
              help="Offer only this tool (repeatable).")
@click.option("--functions", multiple=True, type=click.Path(exists=True, dir_okay=False),
              metavar="FILE", help="Python file whose functions become tools (repeatable).")
@click.option("--max-iterations", type=click.IntRange(min=1), default=10, show_default=True,
              help="Most model calls in one turn of the tool loop.")
@click.option("--approve", is_flag=True, help="Ask y/n on the terminal before each tool call.")
@click.option("--allow-folder", "allow_folders", multiple=True, metavar="PATH",
              type=click.Path(exists=True, file_okay=False),
              help="A folder the file tools may read too, this command only (repeatable).")
@click.option("--rag/--no-rag", default=None,
              help="Retrieve from the knowledge base (default: when the collection has documents).")
@click.option("-k", "k", type=click.IntRange(min=1), default=5, show_default=True,
              help="Excerpts to retrieve.")
@click.option("--threshold", type=THRESHOLD, metavar="COSINE",
              help="Minimum similarity of a retrieved excerpt [default: 0.3].")
@click.option("--theta", type=THETA, metavar="0-1",
              help="Gate strictness: 0 keeps every reranked excerpt, 1 only near-certain "
                   "support [default: rag.theta, else 0.15].")  # fmt: skip
@click.option("-C", "--collection", metavar="NAME", help="Knowledge-base collection.")
@click.option("-f", "--file", "files", multiple=True, type=click.Path(exists=True, dir_okay=False),
              metavar="PATH", help="Put a whole file into the context (repeatable).")
@click.option("--pages", metavar="N-M",
              help="Only these pages of the -f PDFs (2-3,5); a vision model sees them as "
                   "pictures, another reads their text (a scanned page's read by OCR).")
@click.option("--image", "images", multiple=True, metavar="FILE",
              help="Show a vision model a picture (repeatable; - reads it from stdin): PNG, "
                   "JPEG, GIF, WebP, TIFF or BMP, downscaled past 2048 pixels.")
@click.option("--ocr", is_flag=True,
              help="For a model without vision, send the text Tesseract reads in the "
                   "pictures (--image, piped) instead of refusing; a vision model still sees "
                   "the pictures. E.g. cat scan.png | localgpt chat -m qwen3 --ocr 'summarise'")
@click.option("--lock", is_flag=True, help="Use only the --file files: no retrieval.")
@answer_flags
@structured_flags
@template_flags
@json_option
@pass_app
@pass_flags
def chat(app: App, flags: ChatFlags) -> None:
    """Ask a model. With no PROMPT and a terminal, start an interactive chat.

    Piped stdin is attached to the prompt as context (a picture, known by its first
    bytes, is shown to a vision model as --image - would). Output: the answer as Markdown
    on a terminal, the plain answer text when piped, StreamPackets with --json.
    """
    if flags.save:
        from localgpt_cli.cli.template_flags import save_from_flags

        save_from_flags(app, flags)
        return
    turns, question = open_chat(app, flags)
    if flags.each:
        from localgpt_cli.cli.each import run_each

        sys.exit(run_each(turns, " ".join(flags.prompt).strip(), flags.null))
    if question is not None:
        sys.exit(turns.run(question).code)
    if not stdin_is_tty():
        raise UsageError("Nothing to ask: give a prompt or pipe text into localgpt chat.")
    from localgpt_cli.cli.repl import run_repl

    run_repl(turns)
