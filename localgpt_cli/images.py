"""Pictures for vision models: what an image is (its magic bytes), the limits a picture
sent to a model keeps, and the downscale that keeps it within them.

A picture is recognised by its first bytes, never by its name, so `cat photo | localgpt
chat` and a mis-named file behave alike. PNG and JPEG within `MAX_SIDE` pixels go to the
model byte for byte (what reached the wire is the file: its sha256 is the file's); every
other format (GIF, WebP, TIFF, BMP), and a picture larger than `MAX_SIDE`, is decoded and
sent as PNG or JPEG, the two formats every server decodes (llama.cpp's stb_image reads
neither WebP nor TIFF). Pillow decodes; it is imported only when a picture is checked.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field, replace
from typing import Any

from localgpt_cli.errors import InvalidInput

# The longest side a model is sent, in pixels: vision encoders work at 336-1024 px
# (LLaVA 336, Gemma 3 896, Qwen2.5-VL up to ~1000 by default), so 2048 keeps detail and
# spares the wire; a larger picture is downscaled to it, with a warning.
MAX_SIDE = 2048
# Refused outright (exit 6, nothing sent): a file above 50 MiB, or a picture above 80
# megapixels (a decompression bomb decodes to gigabytes from a small file; Pillow itself
# warns from 89).
MAX_FILE_BYTES = 50 * 1024 * 1024
MAX_PIXELS = 80_000_000
SENT_AS_IS = ("image/png", "image/jpeg")
KINDS = "PNG, JPEG, GIF, WebP, TIFF or BMP"

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"),
    (b"MM\x00*", "image/tiff"),
)
# A BMP starts "BM", then its size, then four reserved bytes that are zero: "BM" alone is
# also how "BM25 scores…" starts, and text has no NUL bytes.
_BMP_RESERVED = slice(6, 10)


def sniff(head: bytes) -> str | None:
    """The media type the first bytes say (None: not a picture localgpt sends)."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    for magic, media_type in _MAGIC:
        if head.startswith(magic):
            return media_type
    if head[:2] == b"BM" and head[_BMP_RESERVED] == b"\0\0\0\0":
        return "image/bmp"
    return None


@dataclass(frozen=True)
class Picture:
    """One picture as a model receives it: `data` is what goes on the wire."""

    data: bytes
    media_type: str
    width: int
    height: int
    source: str  # the file, "stdin", or "scan.pdf page 2": what the user calls it
    changed: str | None = None  # "downscaled from 4000x3000", "converted from image/webp"
    # The bytes as given, when `data` is a conversion of them: what OCR reads (a scan
    # keeps its resolution and a TIFF its pages) for a model that cannot see.
    original: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def given(self) -> bytes:
        """The picture as the user gave it."""
        return self.data if self.original is None else self.original

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def ref(self) -> dict[str, Any]:
        """What history keeps of it (not the bytes): enough to say which picture it was."""
        return {"source": self.source, "sha256": self.sha256, "bytes": len(self.data),
                "media_type": self.media_type, "width": self.width, "height": self.height}

    def describe(self) -> str:
        """One line for people and for a model: `a.png (image/png, 640x480, 1,234 bytes)`."""
        return (f"{self.source} ({self.media_type}, {self.width}x{self.height}, "
                f"{len(self.data):,} bytes)")


def picture(data: bytes, source: str) -> Picture:
    """`data` checked and made ready for a model; InvalidInput (one line, exit 6) when it
    is not a picture, too large, or cannot be decoded."""
    media_type = sniff(data[:16])
    if media_type is None:
        raise InvalidInput(f"{source} is not an image localgpt can send ({KINDS}); "
                           "nothing was sent.", hint="Attach documents with -f FILE.")
    if len(data) > MAX_FILE_BYTES:
        raise InvalidInput(f"{source} is too large: {len(data):,} bytes, over the "
                           f"{MAX_FILE_BYTES // 2**20} MiB limit for an image; nothing was sent.",
                           hint="Shrink it first (for example to 2048 pixels on its longest side).")
    image = _decoded(data, source)
    width, height = image.size
    if media_type in SENT_AS_IS and max(width, height) <= MAX_SIDE:
        return Picture(data, media_type, width, height, source)
    return replace(fitted(image, source, media_type), original=data)


def fitted(image: Any, source: str, media_type: str) -> Picture:
    """A decoded Pillow image as PNG (JPEG stays JPEG), at most MAX_SIDE on its longest
    side: what a picture in another format, or a too large one, is sent as."""
    width, height = image.size
    changed = None if media_type == "image/png" else f"converted from {media_type}"
    if max(width, height) > MAX_SIDE:
        image.thumbnail((MAX_SIDE, MAX_SIDE))
        changed = f"downscaled from {width}x{height}"
    out = io.BytesIO()
    if media_type == "image/jpeg":
        image.convert("RGB").save(out, "JPEG", quality=90)
        sent = "image/jpeg"
    else:
        if image.mode not in ("RGB", "RGBA", "L", "LA"):
            image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
        image.save(out, "PNG", compress_level=1)  # zlib's fastest: 6 took 8 s on a photo
        sent = "image/png"
    return Picture(out.getvalue(), sent, image.size[0], image.size[1], source, changed)


def _decoded(data: bytes, source: str) -> Any:
    """The first frame, decoded whole (a truncated or corrupt file fails here, not at
    the model); a picture over MAX_PIXELS is refused before it is decoded."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
        pixels = image.size[0] * image.size[1]
    except Image.DecompressionBombError:  # Pillow's own limit, above ours
        pixels = MAX_PIXELS + 1
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise _unreadable(source) from exc
    if pixels > MAX_PIXELS:
        raise InvalidInput(
            f"{source} is too large: over {MAX_PIXELS // 1_000_000} megapixels, the limit for "
            "an image; nothing was sent.",
            hint="Shrink it first (for example to 2048 pixels on its longest side).")
    try:
        # A JPEG larger than MAX_SIDE is decoded at 1/2, 1/4 or 1/8 scale (still no smaller
        # than MAX_SIDE; every byte is still read): a 12 MP photo in a fraction of the time.
        image.draft("RGB", (MAX_SIDE, MAX_SIDE))
        image.load()
    except (OSError, ValueError, SyntaxError) as exc:
        raise _unreadable(source) from exc
    return image


def _unreadable(source: str) -> InvalidInput:
    return InvalidInput(f"{source} cannot be read as an image (damaged or truncated); "
                        "nothing was sent.", hint="Open it in an image viewer to check.")
