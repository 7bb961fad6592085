"""The `localgpt` command: global options, lazy subcommands, and exit-code handling.

Subcommands are imported only when invoked, and their one-line help is kept here, so
`localgpt --help` never imports ollama, lancedb, pyarrow or rich.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import traceback
from typing import Any

import click

from localgpt_cli import PROTOCOL_VERSION, __version__
from localgpt_cli.cli.app import App
from localgpt_cli.errors import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_PIPE,
    EXIT_USAGE,
    LocalGPTError,
    UsageError,
)

BUG_HINT = "This is a bug in localgpt: run again with --debug and report the traceback."

# name -> (module, attribute, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "chat": ("localgpt_cli.cli.chat", "chat",
             "Ask a model: one-shot, piped, or an interactive REPL."),
    "models": ("localgpt_cli.cli.models", "models", "List, inspect and pull Ollama models."),
    "tools": ("localgpt_cli.cli.tools", "tools", "List and inspect the tools the model can call."),
    "apply": ("localgpt_cli.cli.apply", "apply",
              "Apply an edit the model proposed, by its preview id."),
    "history": ("localgpt_cli.cli.history", "history",
                "List, show, search, export and delete stored conversations."),
    "config": ("localgpt_cli.cli.config_cmd", "config",
               "Show the effective settings and their sources."),
    "memory": ("localgpt_cli.cli.memory", "memory",
               "Project memory: facts sent with every prompt (add, list, rm)."),
    "ingest": ("localgpt_cli.cli.ingest", "ingest",
               "Add files, folders and globs to a collection (incremental, cron-safe)."),
    "docs": ("localgpt_cli.cli.docs", "docs",
             "List, show and remove ingested documents; collection stats."),
    "search": ("localgpt_cli.cli.search", "search",
               "Search a collection: hybrid, vector or keyword."),
    "eval": ("localgpt_cli.cli.eval", "eval_command",
             "Measure retrieval quality (nDCG, recall, MRR) on labelled questions."),
    "schema": ("localgpt_cli.cli.schema_cmd", "schema",
               "Print the JSON Schema a --schema SPEC ('title, severity int') means."),
    "templates": ("localgpt_cli.cli.templates_cmd", "templates",
                  "List, show and edit the prompts kept for chat -t NAME."),
    "completions": ("localgpt_cli.cli.docgen", "completions",
                    "Print the bash, zsh or fish completion script."),
    "man": ("localgpt_cli.cli.docgen", "man", "Print a man page (roff): localgpt man | man -l -"),
}


class StdoutClosed(Exception):
    """The reader of stdout went away (EPIPE).

    Not an OSError on purpose: click turns an EPIPE OSError into exit status 1, and a
    closed pipe is how `localgpt … | head` normally ends, not a failure.
    """


class LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; a write to a closed stdout anywhere in it is StdoutClosed."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError as exc:
            raise StdoutClosed from exc

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = SUBCOMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        command: click.Command = getattr(module, entry[1])
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUBCOMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


EPILOG = """\b
Examples:
  localgpt chat "what does ENOSPC mean?"
  git diff | localgpt chat "write a commit message"
  localgpt chat --json "hi" | jq -j 'select(.type=="token").payload'
  localgpt models
  localgpt config

\b
Exit codes: 0 ok, 1 internal error, 2 usage, 3 Ollama unreachable,
4 model not found, 5 partial failure, 6 invalid input, 75 locked or rate limited,
77 credentials refused, 130 interrupted, 141 stdout closed by its reader.
"""


@click.group(
    cls=LazyGroup,
    invoke_without_command=True,
    epilog=EPILOG,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(
    __version__, "-V", "--version",
    message=f"localgpt %(version)s (output protocol {PROTOCOL_VERSION})",
)  # fmt: skip
@click.option("--json", "json_out", is_flag=True, help="NDJSON on stdout (every command).")
@click.option("--no-color", is_flag=True, help="No colour (also when NO_COLOR is set).")
@click.option("--host", metavar="URL", help="Ollama server (overrides OLLAMA_HOST).")
@click.option(
    "-v", "--verbose", "--debug", "debug", is_flag=True, help="Show tracebacks for errors."
)
@click.pass_context
def cli(ctx: click.Context, json_out: bool, no_color: bool, host: str | None, debug: bool) -> None:
    """localgpt: a local-first command line for Ollama that speaks NDJSON."""
    app = ctx.ensure_object(App)
    app.output.json = app.output.json or json_out
    app.output.color = not no_color
    app.debug = debug or bool(os.environ.get("LOCALGPT_DEBUG"))
    app.set_flag("host", host)
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


def _sigterm(_signum: int, _frame: Any) -> None:
    # One path for Ctrl-C, SIGTERM and SIGHUP: the stream is closed, `done` says aborted,
    # and what the command holds (an ingest lease) is released on the way out.
    raise KeyboardInterrupt


def _exiting(code: int) -> None:
    """From here on a signal ends the process at once: the command has said all it
    will, and a KeyboardInterrupt raised inside the interpreter's exit handlers (joining
    a library's worker threads) would print a traceback instead."""

    def now(_signum: int, _frame: Any) -> None:
        os._exit(code or EXIT_INTERRUPTED)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, now)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and exit with the code PROTOCOL documents."""
    signal.signal(signal.SIGTERM, _sigterm)
    signal.signal(signal.SIGHUP, _sigterm)
    app = App()
    try:
        code = cli.main(args=argv, prog_name="localgpt", standalone_mode=False, obj=app)
    except SystemExit as exc:  # a command that ends with sys.exit(code), as chat does
        code = exc.code
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        from localgpt_cli.render.terminal import guard

        exc.show(file=guard(sys.stderr))  # it quotes what was typed: shown, never obeyed
        code = exc.exit_code if exc.exit_code != 1 else EXIT_USAGE
        if app.output.json or _asks_json(sys.argv[1:] if argv is None else argv):
            _usage_record(app, exc)
    except click.exceptions.Abort:
        sys.stderr.write("\nlocalgpt: interrupted\n")
        code = EXIT_INTERRUPTED
    except KeyboardInterrupt:
        sys.stderr.write("\nlocalgpt: interrupted\n")
        code = EXIT_INTERRUPTED
    except LocalGPTError as exc:
        if app.debug:
            traceback.print_exc()
        with contextlib.suppress(BrokenPipeError):  # stderr has the line; see _flush_stdout
            app.output.error(exc)
        code = exc.exit_code
    except StdoutClosed:
        code = EXIT_PIPE
    except Exception as exc:  # a bug: say where to report it
        if app.debug:
            traceback.print_exc()
        sys.stderr.write(f"localgpt: internal error: {exc!r}\n  {BUG_HINT}\n")
        code = EXIT_INTERNAL
    code = _flush_stdout(code if isinstance(code, int) else 0)
    if argv is None:  # the process's own command, not a call from a test's process
        _exiting(code)
    sys.exit(code)


def _asks_json(args: list[str]) -> bool:
    """Whether `--json` is among the options: a parser error can stop click before the
    flag's own callback ran (an unknown flag, a bad value before it)."""
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


def _usage_record(app: App, exc: click.ClickException) -> None:
    """The parser's error as an `error` record on stdout, as every other error is in
    --json mode (click has already written its usage text to stderr)."""
    record = {"type": "error", "code": UsageError.code, "message": exc.format_message(),
              "retryable": False}  # fmt: skip
    with contextlib.suppress(BrokenPipeError):
        app.output.record(record)


def _flush_stdout(code: int) -> int:
    """Flush stdout now, so that output still buffered meets a closed pipe here rather
    than at interpreter exit (which would print a BrokenPipeError and exit 120).

    `localgpt … | head`: the reader left, which is a normal end for a shell tool. Nothing
    is said on stderr, the exit status is 141 as after SIGPIPE (an error's own code wins),
    and stdout is pointed at /dev/null so that nothing else tries to write to the pipe.
    """
    try:
        if code != EXIT_PIPE:
            sys.stdout.flush()
            return code
    except BrokenPipeError:
        code = code or EXIT_PIPE
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return code
