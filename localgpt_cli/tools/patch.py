"""Unified diffs a model proposes: checked against the file, normalised, applied atomically.

A model's diff is the least trustworthy input localgpt handles that ends up on disk, so
it is applied strictly (every context and removed line must match the file exactly; no
fuzz), and what the user is shown is not the model's text but the diff regenerated from
the file and the result, so the preview and what `localgpt apply` writes cannot differ.
The file's hash at preview time travels with the preview: a file changed since is
refused rather than patched blind.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from localgpt_cli.tools.base import ToolError

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
MAX_EDIT_BYTES = 2 * 1024 * 1024


@dataclass
class Hunk:
    old_start: int  # 1-based, as in the header (0 for an empty old side)
    old: list[str]
    new: list[str]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse_diff(diff: str) -> list[Hunk]:
    """The hunks of a one-file unified diff; a ToolError says what is wrong and where."""
    if "\x00" in diff:
        raise ToolError("the diff contains a NUL byte")
    hunks: list[Hunk] = []
    counts: list[tuple[int, int, int]] = []  # (header line, old count, new count)
    for number, line in enumerate(diff.splitlines(), 1):
        header = HUNK.match(line)
        if header:
            old_n = int(header.group(2)) if header.group(2) is not None else 1
            new_n = int(header.group(4)) if header.group(4) is not None else 1
            hunks.append(Hunk(int(header.group(1)), [], []))
            counts.append((number, old_n, new_n))
        elif not hunks:
            if line.startswith(("---", "+++", "diff ", "index ")) or not line.strip():
                continue
            raise ToolError(
                f"malformed diff: line {number} ({line[:40]!r}) comes before the first "
                "'@@ -a,b +c,d @@' hunk header"
            )
        elif line.startswith("\\"):
            continue  # "\ No newline at end of file": the file's own ending is kept
        elif line[:1] in ("-", "+", " ") or line == "":
            _add_line(hunks[-1], line)
        else:
            raise ToolError(
                f"malformed diff: line {number} ({line[:40]!r}) starts with neither ' ', '-' "
                "nor '+'"
            )
    if not hunks:
        raise ToolError("malformed diff: no '@@ -a,b +c,d @@' hunk header")
    for hunk, (number, old_n, new_n) in zip(hunks, counts, strict=True):
        if (len(hunk.old), len(hunk.new)) != (old_n, new_n):
            raise ToolError(
                f"malformed diff: the hunk at line {number} announces {old_n} old and {new_n} "
                f"new lines but has {len(hunk.old)} and {len(hunk.new)}"
            )
    return hunks


def _add_line(hunk: Hunk, line: str) -> None:
    kind, text = (line[0], line[1:]) if line else (" ", "")  # a blank context line
    if kind != "+":
        hunk.old.append(text)
    if kind != "-":
        hunk.new.append(text)


def _find(lines: list[str], block: list[str], hint: int, start: int) -> int:
    """Where `block` occurs at or after `start`: at `hint` if it does, else the nearest."""
    if not block:
        return max(hint, start)
    size = len(block)
    places = [i for i in range(start, len(lines) - size + 1) if lines[i : i + size] == block]
    if not places:
        raise ToolError(
            f"the diff does not match the file: no lines {block[0][:40]!r}… "
            f"({size} line(s)) near line {hint + 1}; read the file again and redo the diff"
        )
    return min(places, key=lambda i: abs(i - hint))


def apply_hunks(text: str, hunks: list[Hunk]) -> str:
    """`text` with the hunks applied strictly; its line ending and final newline kept."""
    newline = "\r\n" if "\r\n" in text else "\n"
    final = text.endswith(("\n", "\r"))
    lines = text.splitlines()
    out: list[str] = []
    at = 0
    for hunk in hunks:
        hint = max(hunk.old_start - 1, 0) if hunk.old else hunk.old_start
        found = _find(lines, hunk.old, hint, at)
        out.extend(lines[at:found])
        out.extend(hunk.new)
        at = found + len(hunk.old)
    out.extend(lines[at:])
    result = newline.join(out)
    return result + newline if out and (final or not text) else result


def unified(path: str, before: str, after: str) -> str:
    """The diff the user is shown (and `apply` replays): regenerated, three lines of context."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"a/{path}", f"b/{path}", lineterm=""
    )
    return "\n".join(lines) + "\n"


def read_text(real: Path, shown: str) -> tuple[bytes, str]:
    """A regular text file's bytes and text, or a ToolError saying why not."""
    try:
        if not real.is_file():
            raise ToolError(f"{shown} is not a regular file" if real.exists()
                            else f"no such file: {shown}")
        if real.stat().st_size > MAX_EDIT_BYTES:
            raise ToolError(f"{shown} is larger than {MAX_EDIT_BYTES // 1024 // 1024} MB")
        data = real.read_bytes()
    except OSError as exc:
        raise ToolError(f"cannot read {shown}: {exc.strerror or exc}") from None
    if b"\x00" in data[:8192]:
        raise ToolError(f"{shown} looks like a binary file; only text files can be edited")
    try:
        return data, data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text; it cannot be edited") from None


def _keep(real: Path, backup: Path) -> None:
    """The old file under its backup name: a hard link (no copy), else a copy."""
    try:
        os.link(real, backup)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links
        import shutil

        shutil.copy2(real, backup)


def _keep_owner(tmp: str, real: Path, st: os.stat_result) -> None:
    """Give the temp file the old file's owner and group (only when they differ)."""
    mine = os.stat(tmp)
    if (mine.st_uid, mine.st_gid) == (st.st_uid, st.st_gid):
        return
    try:
        os.chown(tmp, st.st_uid, st.st_gid)
    except PermissionError:
        raise ToolError(f"refused: {real} belongs to uid {st.st_uid} gid {st.st_gid}, which "
                        "this user cannot give the new file; its owner would change.") from None


def write_atomic(real: Path, data: bytes, backup: Path,
                 owner: os.stat_result | None = None) -> None:
    """Keep the old file as `backup`, then replace it: a temp file in the same folder,
    fsync, rename (so a crash leaves the old file or the new one, never half of one).
    The new file gets the old one's mode and, when it differs from the writer's, its
    owner (`owner`: the stat to keep); an owner that cannot be kept is a ToolError and
    nothing is written, rather than a file silently handed to whoever ran the write."""
    st = owner or real.stat()
    fd, tmp = tempfile.mkstemp(dir=real.parent, prefix=f".{real.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        _keep_owner(tmp, real, st)
        os.chmod(tmp, st.st_mode & 0o7777)  # after chown, which clears set-id bits
        _keep(real, backup)
        os.replace(tmp, real)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(real.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
