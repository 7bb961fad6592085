"""Asking before deleting: on a terminal a y/N question, without one a refusal unless -y.

Shared by every command that deletes (`history rm`, `history prune`, `docs rm`), so they
all behave as a careful user of `rm -i` or `git clean` expects: a script or cron job never
hangs on a prompt nobody sees, and never deletes without having been told to.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from localgpt_cli.cli.app import App
from localgpt_cli.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])


def yes_option(f: F) -> F:
    """`-y/--yes`: do not ask."""
    return click.option(
        "-y", "--yes", is_flag=True, help="Do not ask (needed when stdin is no terminal)."
    )(f)


def stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False


def refuse_without_terminal(yes: bool, what: str) -> None:
    """Without -y and without a terminal on stdin nobody can confirm: a usage error (exit 2)
    rather than a silent yes or a prompt that waits forever."""
    if not yes and not stdin_is_tty():
        raise UsageError(
            f"refusing to {what} without confirmation: stdin is not a terminal.",
            hint="Pass -y to do it without asking.",
        )


def ask(app: App, question: str) -> bool:
    """A yes/no question on the terminal (default no); saying no is not an error."""
    from localgpt_cli.render.terminal import visible

    if click.confirm(visible(question), default=False, err=True):
        return True
    app.output.stderr.write("Nothing deleted.\n")
    return False
