"""Write small, valid PDFs with real text, for tests and benchmarks (no extra dependency).

pypdf can write PDFs but not draw text, so the file is assembled by hand: one Helvetica
font, one content stream per page (`BT /F1 11 Tf ... Tj ... ET`), and an xref table
with exact byte offsets so that strict readers accept it.
"""

from __future__ import annotations

from pathlib import Path

LINE_HEIGHT = 14
TOP = 760


def _pdf_string(line: str) -> bytes:
    """A PDF literal string in WinAnsi: escape delimiters, octal-escape non-ASCII."""
    out = bytearray(b"(")
    for byte in line.encode("cp1252", errors="replace"):
        if byte in b"()\\":
            out += b"\\" + bytes([byte])
        elif 32 <= byte < 127:
            out.append(byte)
        else:
            out += b"\\%03o" % byte
    return bytes(out + b")")


def _content(text: str) -> bytes:
    if not text:
        return b""
    ops = [b"BT /F1 11 Tf %d TL 56 %d Td" % (LINE_HEIGHT, TOP)]
    for n, line in enumerate(text.split("\n")):
        ops.append((b"" if n == 0 else b"T* ") + _pdf_string(line) + b" Tj")
    ops.append(b"ET")
    return b"\n".join(ops)


def pdf_bytes(pages: list[str]) -> bytes:
    """A PDF whose page i shows pages[i] (lines split on newlines); "" is a blank page."""
    font_id = 3 + 2 * len(pages)
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>"
        % (b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(len(pages))), len(pages)),
    ]
    for i, text in enumerate(pages):
        stream = _content(text)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792]"
            b" /Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>" % (font_id, 4 + 2 * i)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    objects.append(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    )
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref_at = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref_at,
    )
    return bytes(out)


def make_pdf(
    path: Path,
    pages: list[str],
    encrypt_password: str | None = None,
    owner_password: str | None = None,
) -> Path:
    """Write a PDF of `pages` to `path`; with a password, encrypt it (RC4, no extra deps).

    encrypt_password="" with an owner_password makes the common "restrictions only" PDF
    that opens without a password.
    """
    path = Path(path)
    data = pdf_bytes(pages)
    if encrypt_password is None:
        path.write_bytes(data)
        return path
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(
        user_password=encrypt_password,
        owner_password=owner_password or encrypt_password or "owner",
        algorithm="RC4-128",
    )
    with open(path, "wb") as fh:
        writer.write(fh)
    return path
