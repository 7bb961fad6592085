"""The file tools: `read_file` and `list_directory`, confined to allowed folders.

Every path goes through the `Sandbox` (tools/sandbox.py): `..` and symlinks resolved,
then the allowed roots (by default the current directory; not $HOME or /, see
cli/toolbox.file_roots), the system trees and the secrets rules (tools/denylist.py).
A file starting like a private key is refused, and what a read returns has its secrets
redacted. Devices, pipes and binaries are refused, and what comes back is capped with a
visible marker so the model knows it saw only part of the file and how to ask for more.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from localgpt_cli.images import MAX_FILE_BYTES, sniff
from localgpt_cli.tools.base import Tool, ToolError, cut
from localgpt_cli.tools.denylist import HEAD_BYTES, DenyList
from localgpt_cli.tools.picture_read import OcrFn, PictureRead, picture_read
from localgpt_cli.tools.sandbox import SECRET_MARGIN, Sandbox, Warn

DEFAULT_MAX_CHARS = 20_000
MAX_CHARS_LIMIT = 100_000
MAX_READ_BYTES = 16 * 1024 * 1024
MAX_ENTRIES = 200
SNIFF_BYTES = max(8192, HEAD_BYTES)  # also what the private-key rule looks at


def _open_regular(sandbox: Sandbox, path: str) -> tuple[BinaryIO, os.stat_result, Path]:
    """Open a sandboxed path for reading, refusing anything but a regular file; also
    returns the resolved path, which the caller checks the first bytes read against.

    The type check is made on the opened descriptor, so a file swapped for a FIFO or a
    device between check and use is still caught; O_NONBLOCK keeps a FIFO from hanging.
    """
    real = sandbox.resolve(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(real, flags)
    except FileNotFoundError:
        raise ToolError(f"no such file: {path}") from None
    except PermissionError:
        raise ToolError(f"permission denied: {path}") from None
    except OSError as exc:
        raise ToolError(f"cannot open {path}: {exc.strerror}") from None
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        os.close(fd)
        raise ToolError(f"{path} is a directory: use list_directory to see what it holds")
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise sandbox.refuse(path, "is not a regular file (device, pipe or socket)")
    return os.fdopen(fd, "rb"), info, real


def _page_of(
    sandbox: Sandbox, path: str, data: bytes, page: int | None, max_chars: int, total_note: str
) -> str:
    """One window of `max_chars` characters, secrets redacted, with a marker when the
    text goes on. Only the window (and a margin) is scanned for secrets, and an ASCII
    file is decoded only there, so a page of a long file costs no more than before
    redaction."""
    plain = data.isascii()  # then a byte is a character: no need to decode it all
    text = "" if plain else data.decode("utf-8-sig", errors="replace")
    total = len(data) if plain else len(text)
    pages = max(1, math.ceil(total / max_chars))
    number = page or 1
    if number > pages:
        raise ToolError(
            f"page {number} is out of range: the text has {pages} page(s) of {max_chars} characters"
        )
    start = (number - 1) * max_chars
    stop = min(total, start + max_chars)
    if plain:
        part = _ascii_page(sandbox, path, data, start, stop)
    else:
        part = sandbox.redacted_part(text, start, stop, path)
    if pages == 1 and not total_note:
        return part
    shown = f"{stop - start}" if number == 1 else f"characters {start + 1}-{stop}"
    more = f"; pass page={number + 1} to continue" if number < pages else ""
    return (
        f"{part}\n[… truncated: showed {shown} of {total} characters{total_note} "
        f"(page {number} of {pages}){more}]"
    )


def _ascii_page(sandbox: Sandbox, path: str, data: bytes, start: int, stop: int) -> str:
    """`data[start:stop]` of an ASCII file, redacted: only the lines the redaction looks
    at (the page and SECRET_MARGIN either side, to whole lines) are decoded."""
    low = data.rfind(b"\n", 0, max(0, start - SECRET_MARGIN)) + 1
    high = data.find(b"\n", min(len(data), stop + SECRET_MARGIN))
    high = len(data) if high == -1 else high
    window = data[low:high].decode("ascii")
    lines_before = data.count(b"\n", 0, low) if low else 0
    return sandbox.redacted_part(window, start - low, stop - low, path, lines_before)


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{size} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


def _read_pdf(fh: BinaryIO, path: str, page: int | None, max_chars: int) -> str:
    """PDF text by page through PDFium; pypdf reads the files PDFium refuses."""
    from localgpt_cli.pdf_text import PdfPageError, PdfPassword, PdfRefused, open_pdf

    try:
        with open_pdf(fh) as pdf:
            pages = _PageTexts(pdf.count, pdf.text)
            return _pdf_text(pages, path, page, max_chars)
    except PdfPassword:
        raise ToolError(f"{path} is an encrypted PDF") from None
    except PdfPageError as exc:
        raise ToolError(f"cannot read PDF {path}: {exc}") from None
    except PdfRefused:
        fh.seek(0)
        return _read_pdf_with_pypdf(fh, path, page, max_chars)


class _PageTexts:
    """A PDF's page count and a function giving page N's text, whichever library reads it."""

    def __init__(self, count: int, text: Callable[[int], str]) -> None:
        self.count = count
        self.text = text


def _pdf_text(pages: _PageTexts, path: str, page: int | None, max_chars: int) -> str:
    count = pages.count
    if page is not None:
        if page > count:
            raise ToolError(f"page {page} is out of range: {path} has {count} page(s)")
        text = pages.text(page)
        if not text.strip():
            return f"[page {page} of {path} has no extractable text]"
        return cut(text, max_chars, f"page {page} of {count}")
    parts = [f"--- page {i} ---\n{pages.text(i)}" for i in range(1, count + 1)]
    return cut("\n".join(parts), max_chars, f"a {count}-page PDF; pass page=N to read page N")


def _read_pdf_with_pypdf(fh: BinaryIO, path: str, page: int | None, max_chars: int) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(fh)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ToolError(f"{path} is an encrypted PDF")
        pages = _PageTexts(len(reader.pages), lambda n: reader.pages[n - 1].extract_text() or "")
        return _pdf_text(pages, path, page, max_chars)
    except (PdfReadError, ValueError, KeyError, OSError) as exc:
        raise ToolError(f"cannot read PDF {path}: {exc}") from None


def read_file(
    sandbox: Sandbox, path: str, page: int | None = None, max_chars: int = DEFAULT_MAX_CHARS,
    ocr: OcrFn | None = None,
) -> str | PictureRead:
    """Text of a file in the sandbox (PDF text by page), capped at `max_chars`; a picture
    (known by its first bytes) as a `PictureRead`: the agent loop shows it to a vision
    model, or gives a text model the text `ocr` reads in it (tools/picture_read.py)."""
    fh, info, real = _open_regular(sandbox, path)
    with fh:
        head = fh.read(SNIFF_BYTES)  # the secrets rule on the first bytes comes first
        sandbox.check_head(real, path, head)
        if sniff(head[:16]) is not None:
            data = head + fh.read(MAX_FILE_BYTES + 1 - len(head))
            return picture_read(sandbox, data, path, max_chars, ocr)
        if head.startswith(b"%PDF-") or path.lower().endswith(".pdf"):
            fh.seek(0)
            return sandbox.redacted(_read_pdf(fh, path, page, max_chars), path)
        if b"\x00" in head:
            raise ToolError(
                f"refused: {path} looks like a binary file ({_human_size(info.st_size)}); "
                "only text and PDF files can be read"
            )
        if len(head) < SNIFF_BYTES:
            data = head[:MAX_READ_BYTES]  # the whole file
        else:
            fh.seek(0)
            data = fh.read(MAX_READ_BYTES)
    note = ""
    if info.st_size > MAX_READ_BYTES:
        note = (
            f" read from the first {_human_size(MAX_READ_BYTES)} of a "
            f"{_human_size(info.st_size)} file"
        )
    return _page_of(sandbox, path, data, page, max_chars, note)


def list_directory(sandbox: Sandbox, path: str = ".", show_hidden: bool = False) -> str:
    """Entries of a sandboxed directory: name, type and size, hidden ones on request."""
    real = sandbox.resolve(path)
    if not real.exists():
        raise ToolError(f"no such directory: {path}")
    if not real.is_dir():
        raise ToolError(f"{path} is not a directory: use read_file to read it")
    try:
        with os.scandir(real) as it:
            entries = list(it)
    except PermissionError:
        raise ToolError(f"permission denied: {path}") from None
    entries = [e for e in entries if sandbox.deny.rule_for(_target(real, e)) is None]
    hidden = sum(1 for e in entries if e.name.startswith("."))
    if not show_hidden:
        entries = [e for e in entries if not e.name.startswith(".")]
    entries.sort(key=lambda e: (not e.is_dir(follow_symlinks=False), e.name.lower()))
    shown: list[os.DirEntry[str]] = []
    examined = 0
    for entry in entries:  # a file is opened only when it would be shown
        if len(shown) == MAX_ENTRIES:
            break
        examined += 1
        if not (entry.is_file() and sandbox.starts_like_a_key(real / entry.name)):
            shown.append(entry)
    total = len(entries) - (examined - len(shown))
    lines = [f"{real} ({total} entries"]
    if hidden and not show_hidden:
        lines[0] += f"; {hidden} hidden not shown, pass show_hidden=true to see them"
    lines[0] += ")"
    lines.extend(_entry_line(entry) for entry in shown)
    if total > MAX_ENTRIES:
        lines.append(f"[… truncated: showed {MAX_ENTRIES} of {total} entries]")
    return "\n".join(lines)


def _target(folder: Path, entry: os.DirEntry[str]) -> Path:
    """The path the secrets rules judge an entry by: a symlink's target, resolved."""
    path = folder / entry.name
    return Path(os.path.realpath(path)) if entry.is_symlink() else path


def _entry_line(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return f"link  {entry.name}"
        if entry.is_dir(follow_symlinks=False):
            return f"dir   {entry.name}/"
        if entry.is_file(follow_symlinks=False):
            size = entry.stat(follow_symlinks=False).st_size
            return f"file  {entry.name}  ({_human_size(size)})"
    except OSError:
        pass
    return f"other {entry.name}"


def file_tools(
    roots: Sequence[Path | str],
    base: Path | str | None = None,
    default_max_chars: int = DEFAULT_MAX_CHARS,
    deny: DenyList | None = None,
    warn: Warn | None = None,
    ocr: OcrFn | None = None,
) -> list[Tool]:
    """`read_file` and `list_directory` over one sandbox (`deny`: the secrets rules,
    built-in ones by default; `warn(code, message)`: where a redaction is reported;
    `ocr`: how read_file reads a picture's text for a model that cannot see)."""
    sandbox = Sandbox(roots, base, deny, warn)
    where = f"Allowed folders: {sandbox.roots_text()}."
    return [_read_tool(sandbox, where, default_max_chars, ocr), _list_tool(sandbox, where)]


def _read_tool(sandbox: Sandbox, where: str, default_max_chars: int, ocr: OcrFn | None) -> Tool:
    def run_read(args: dict[str, Any]) -> str | PictureRead:
        return read_file(sandbox, args["path"], args.get("page"),
                         args.get("max_chars", default_max_chars), ocr)

    return Tool(
        name="read_file",
        description=(
            "Read a text or PDF file and return its text; an image is shown to you if you "
            "can see images. Long files come back in pages "
            f"of max_chars characters (default {default_max_chars}); PDFs by page. "
            f"Relative paths start in {sandbox.base}. {where}"
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "file path, relative or absolute"},
                "page": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "PDF page number, or for text the part of max_chars "
                    "characters to read (default 1)",
                },
                "max_chars": {
                    "type": "integer",
                    "minimum": 100,
                    "maximum": MAX_CHARS_LIMIT,
                    "default": default_max_chars,
                    "description": f"characters to return at most (default {default_max_chars})",
                },
            },
            "required": ["path"],
            "additionalProperties": False,
        },
        handler=run_read,
        examples=(
            "read the file notes/todo.md",
            "what does README.md say about installation?",
            "show me page 3 of report.pdf",
        ),
        core=True,
        group="files",
        reads_local=True,
    )


def _list_tool(sandbox: Sandbox, where: str) -> Tool:
    def run_list(args: dict[str, Any]) -> str:
        return list_directory(sandbox, args.get("path", "."), args.get("show_hidden", False))

    return Tool(
        name="list_directory",
        description=(
            "List the files and folders in a directory with their sizes. "
            f"Relative paths start in {sandbox.base}. {where}"
        ),
        parameters={
            "type": "object",
            "properties": {
                "path": {
                    "type": "string",
                    "default": ".",
                    "description": "directory to list (default: the current directory)",
                },
                "show_hidden": {
                    "type": "boolean",
                    "default": False,
                    "description": "include names starting with a dot (default false)",
                },
            },
            "additionalProperties": False,
        },
        handler=run_list,
        examples=(
            "what files are in this folder?",
            "list the contents of the docs directory",
            "which PDFs do I have in reports/?",
        ),
        core=True,
        group="files",
        reads_local=True,
    )
