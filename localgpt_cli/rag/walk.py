"""Which files an ingest run looks at: paths, folders (recursive) and globs, filtered.

Rules, chosen for a cron job pointed at a home folder:
- hidden files and folders (`.git`, `.venv`, `.env`, ...) inside a folder are skipped;
  a hidden path named on the command line is taken, because the user asked for it;
- symlinks inside a folder are never followed: a link out of the tree would pull in
  files nobody pointed at (and a link to `..` would loop), and a link inside the tree
  points at files the walk reaches anyway. A symlink named on the command line is
  resolved, since naming it is pointing at it;
- `--exclude` prunes folders and files, `--include` (if any) keeps only matching files.
  A pattern without `/` matches a name at any depth (`node_modules`, `*.min.js`); one with
  `/` matches the path relative to the folder given (`drafts/*`);
- files whose name says binary (images, archives...) are dropped here without being
  opened; content sniffing is left to the caller, which skips it for unchanged files;
- FIFOs, sockets and devices are never opened (opening a FIFO blocks until someone writes
  to it, and `/dev/zero` never ends): they are returned apart so the caller can say so.

A named path that does not exist is an error, not an empty walk: with `--prune`, an
unmounted drive must not look like a folder whose files were all deleted.
"""

from __future__ import annotations

import glob
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from localgpt_cli.errors import InvalidInput
from localgpt_cli.rag.filetypes import detect_type

GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class FoundFile:
    """A file to consider: its absolute path and what `stat` said."""

    path: str
    size: int
    mtime_ns: int


@dataclass
class Walked:
    """What a walk found: the roots it started from (absolute, resolved), the files to
    consider, and the non-regular files it passed over without opening them."""

    roots: list[str]
    files: list[FoundFile]
    irregular: list[str]


def under(path: str, roots: Sequence[str]) -> bool:
    """Whether `path` is one of `roots` or inside one of them (a file root holds only
    itself): what an ingest run may prune."""
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def expand(args: Sequence[str]) -> list[str]:
    """Absolute, symlink-resolved paths named by the arguments (globs expanded)."""
    out: list[str] = []
    for arg in args:
        raw = os.path.expanduser(arg)
        if os.path.lexists(raw) or not GLOB_CHARS & set(raw):
            if not os.path.exists(raw):
                raise InvalidInput(
                    f"No such file or folder: {arg}.", hint="Check the path (nothing was changed)."
                )
            out.append(os.path.realpath(raw))
            continue
        matches = sorted(glob.glob(raw, recursive=True))
        if not matches:
            raise InvalidInput(
                f"The pattern {arg!r} matches no file or folder.",
                hint="Quote it so the shell does not expand it, or check it.",
            )
        out.extend(os.path.realpath(m) for m in matches)
    return out


def _matches(patterns: Sequence[str], name: str, rel: str) -> bool:
    return any(fnmatchcase(rel if "/" in p else name, p) for p in patterns)


def walk(
    args: Sequence[str], include: Sequence[str] = (), exclude: Sequence[str] = ()
) -> Walked:
    """Every file to consider under the arguments, sorted by path, each once."""
    found: dict[str, FoundFile] = {}
    irregular: set[str] = set()
    roots = expand(args)
    for root in roots:
        if os.path.isdir(root):
            _walk_dir(root, include, exclude, found, irregular)
        elif detect_type(Path(root)) is not None:
            st = os.stat(root)
            if stat.S_ISREG(st.st_mode):
                found[root] = FoundFile(root, st.st_size, st.st_mtime_ns)
            else:
                irregular.add(root)
    return Walked(roots, [found[p] for p in sorted(found)], sorted(irregular))


def _walk_dir(
    root: str,
    include: Sequence[str],
    exclude: Sequence[str],
    found: dict[str, FoundFile],
    irregular: set[str],
) -> None:
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue  # unreadable folder (permissions): nothing in it can be ingested
        subfolders = []
        for entry in entries:
            name = entry.name
            if name.startswith(".") or entry.is_symlink():
                continue
            rel = os.path.relpath(entry.path, root).replace(os.sep, "/")
            if exclude and _matches(exclude, name, rel):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    subfolders.append(entry.path)
                    continue
                if include and not _matches(include, name, rel):
                    continue
                if detect_type(Path(name)) is None:
                    continue
                if not entry.is_file(follow_symlinks=False):
                    irregular.add(entry.path)  # sockets, fifos, devices
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found.setdefault(entry.path, FoundFile(entry.path, st.st_size, st.st_mtime_ns))
        stack.extend(sorted(subfolders, reverse=True))
