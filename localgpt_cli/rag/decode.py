"""Bytes of a text file -> str, with a fallback for files that are not UTF-8.

Users' notes come from every era and editor: Windows-1252 exports, UTF-16 files saved
by Notepad, Latin-1 logs. Refusing them would lose documents; guessing silently would
hide mojibake. So each fallback decodes and says which encoding it used.
"""

from __future__ import annotations

import codecs

UTF32_BOMS = (codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR -> LF, exactly as Python's text mode reads a file.

    Line numbers are counted in LF, so a chunk's line range points at the same lines an
    editor (or `open(path).read().splitlines()`) shows.
    """
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def decode_text(data: bytes, declared: str | None = None) -> tuple[str, str | None]:
    """Decode `data`; return the text and a warning when it was not UTF-8.

    Order: a UTF-32/UTF-16 byte-order mark wins; then UTF-8 (with or without BOM); then
    the encoding a document declares (an HTML meta charset), if any; then cp1252 (what
    "ANSI" means on Windows, a superset of Latin-1's printable range); then Latin-1,
    which cannot fail.
    """
    if data.startswith(UTF32_BOMS):
        return _decode_wide(data, "utf-32")
    if data.startswith(UTF16_BOMS):
        return _decode_wide(data, "utf-16")
    try:
        return normalize_newlines(data.decode("utf-8-sig")), None
    except UnicodeDecodeError:
        pass
    candidates = [declared] if declared else []
    for encoding in [*candidates, "cp1252"]:
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
        return normalize_newlines(text), f"not valid UTF-8; decoded as {encoding}"
    text = data.decode("latin-1")
    return normalize_newlines(text), "not valid UTF-8; decoded as latin-1"


def _decode_wide(data: bytes, encoding: str) -> tuple[str, str | None]:
    try:
        text = data.decode(encoding)
        warning = f"decoded as {encoding} (byte-order mark)"
    except UnicodeDecodeError:
        text = data.decode(encoding, errors="replace")
        warning = f"decoded as {encoding} (byte-order mark); invalid bytes replaced"
    return normalize_newlines(text), warning
