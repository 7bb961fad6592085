"""Writing a proposed edit: every check first, then one atomic write that keeps the file's
owner and mode.

An edit preview comes out of the history, which is not ours alone (an import, a shared
PostgreSQL server), so nothing in it is trusted: the file must lie inside the folders this
invocation allows (and inside the ones the preview records, when it records any), no
folder on the way to it may be a symlink leading elsewhere, it must be a file its user
may write (a 0444 file is refused, not replaced), and its owner must survive the write.
`plan_edit` does all of that without writing, so `localgpt apply` and the REPL can show
the diff and ask before `PlannedEdit.write` touches anything.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localgpt_cli.tools.base import ToolError
from localgpt_cli.tools.patch import apply_hunks, parse_diff, read_text, sha256, write_atomic
from localgpt_cli.tools.sandbox import Sandbox


@dataclass
class PlannedEdit:
    """An edit that passed every check: the real file, the bytes it will hold, its
    backup's name and the file's stat when checked (owner and mode to keep)."""

    path: Path
    data: bytes
    backup: Path
    before: os.stat_result

    def write(self) -> tuple[Path, Path]:
        """Write it (ToolError if the file or its folder changed since the plan)."""
        _check_unchanged(self)
        write_atomic(self.path, self.data, self.backup, owner=self.before)
        return self.path, self.backup


def plan_edit(preview: dict[str, Any], sandboxes: Sequence[Sandbox]) -> PlannedEdit:
    """The checked edit of an edit preview, or a ToolError saying why it is refused; the
    file must lie inside every sandbox (this invocation's, and the recorded one)."""
    if preview.get("kind") != "edit":
        raise ToolError(f"preview {preview.get('id')} is a {preview.get('kind')}, not an edit: "
                        "localgpt never runs a proposed command.")
    path = str(preview.get("path"))
    _no_symlink_on_the_way(path)
    real = _inside_all(path, sandboxes)
    data, before = read_text(real, path)
    backup = real.with_name(f"{real.name}.{preview.get('id')}.bak")
    if sha256(data) != preview.get("sha256") and backup.exists():
        raise ToolError(f"refused: {path} was already changed by this edit (its backup "
                        f"{backup} exists).")
    if sha256(data) != preview.get("sha256"):
        raise ToolError(f"refused: {path} changed since the diff was made; "
                        "ask for the edit again.")
    after = apply_hunks(before, parse_diff(str(preview.get("diff"))))
    if backup.exists():
        raise ToolError(f"refused: the backup {backup} already exists.")
    st = real.stat()
    _writable(path, st, real)
    return PlannedEdit(real, after.encode("utf-8"), backup, st)


def _inside_all(path: str, sandboxes: Sequence[Sandbox]) -> Path:
    """The real path, checked by each sandbox in turn (the first refusal is the error)."""
    real = Path(path)
    for sandbox in sandboxes:
        real = sandbox.resolve(path)
    return real


def _no_symlink_on_the_way(path: str) -> None:
    """A preview records the real path; if it no longer is one, a folder on the way was
    made a symlink since (or the preview was forged): refused, naming the link."""
    given = Path(path)
    if "\x00" in path or not given.is_absolute():
        return  # the sandbox refuses a NUL; a relative path is resolved by the sandbox
    real = Path(os.path.realpath(given))
    if given == real:
        return
    for folder in (given, *given.parents):
        if folder.is_symlink():
            raise ToolError(f"refused: {folder} on the way to {path} is a symlink (to "
                            f"{os.path.realpath(folder)}); apply follows no links.")
    raise ToolError(f"refused: {path} is not its real path ({real}); apply follows no links.")


def _writable(path: str, st: os.stat_result, real: Path) -> None:
    """Refuse a file nobody may write (0444) or this user may not: replacing it would
    bypass its permissions, since the rename needs only the folder to be writable."""
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise ToolError(f"refused: {path} is read-only (mode {stat.S_IMODE(st.st_mode):04o}); "
                        "make it writable first if the edit is wanted.")
    if not os.access(real, os.W_OK):
        raise ToolError(f"refused: {path} is not writable by this user.")


def _check_unchanged(plan: PlannedEdit) -> None:
    """Between the plan (and the question) and the write: the same file, same folder."""
    try:
        now = plan.path.stat()
        same_folder = Path(os.path.realpath(plan.path.parent)) == plan.path.parent
    except OSError as exc:
        raise ToolError(f"refused: {plan.path} cannot be read again: {exc.strerror}.") from None
    if not same_folder or (now.st_ino, now.st_dev) != (plan.before.st_ino, plan.before.st_dev) \
            or now.st_mtime_ns != plan.before.st_mtime_ns:
        raise ToolError(f"refused: {plan.path} changed while the edit was being confirmed.")
