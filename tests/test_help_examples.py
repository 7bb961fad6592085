"""The examples under each command's --help are shell a user can paste: every example
line parses as a shell command (quotes balanced), so an escape that Python read first
(a `\\n` turned into a real line break inside `printf '…'`) cannot slip into the help and
the man pages generated from it."""

from __future__ import annotations

import shlex
from collections.abc import Iterator

import click

from localgpt_cli.cli.main import cli

SHELL_STARTS = ("localgpt", "printf", "cd ", "echo ", "cat ", "git ", "eval ", "LOCALGPT_",
                "OLLAMA_", "jq ", "find ", "ls ")  # fmt: skip


def commands(cmd: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    yield " ".join(("localgpt", *path)), cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd)
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            assert sub is not None
            yield from commands(sub, (*path, name))


def test_every_example_line_is_one_shell_command():
    checked = 0
    for name, cmd in commands(cli):
        for line in (cmd.epilog or "").splitlines():
            text = line.strip()
            if not text.startswith(SHELL_STARTS):
                continue
            try:
                shlex.split(text, comments=True)
            except ValueError as exc:
                raise AssertionError(f"{name} --help: {text!r} is not shell ({exc})") from None
            checked += 1
    assert checked > 30  # the examples were found, not skipped
