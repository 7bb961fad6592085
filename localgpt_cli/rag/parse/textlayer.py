"""Whether a PDF page's text layer is worth keeping, or the page must be read by OCR.

Measured on real files (Debian's libtasn1 manual and shared-mime-info spec, 53 pages with
a text layer): every page has >= 151 letters and digits, at least 86% of its tokens that
hold a letter or digit are words (a run of two letters, or a number: dot-leader tables
of contents included), and no private-use, control or replacement character. A text layer
that is garbage holds few of those: a font without a Unicode map gives glyph names run
together (`/g84/g104/g101`: 0% words) or private-use code points (100% odd characters).
The limits below leave a wide margin on both sides. A layer of real letters in the wrong
order (a shifted encoding) passes: telling it from a language needs a dictionary.
"""

from __future__ import annotations

import re
import unicodedata

MIN_CHARACTERS = 20  # letters and digits below which a page has "almost no" text
MIN_WORD_SHARE = 0.5  # of the tokens holding a letter or digit
MAX_ODD_SHARE = 0.1  # of the non-space characters: private use, control, unassigned, U+FFFD

_LETTERS = re.compile(r"[^\W\d_]{2,}")
_NUMBER = re.compile(r"^[\W_]*\d+(?:[.,:/-]\d+)*[\W_]*$")
_ODD = frozenset({"Co", "Cc", "Cn", "Cs"})


def is_sparse(text: str) -> bool:
    """Almost no characters: an empty page, or a scan with a page number in its layer."""
    return sum(ch.isalnum() for ch in text) < MIN_CHARACTERS


def is_garbled(text: str) -> bool:
    """Mostly non-words or characters no text has: a text layer that reads as noise."""
    visible = [ch for ch in text if not ch.isspace()]
    odd = sum(ch == "\ufffd" or unicodedata.category(ch) in _ODD for ch in visible)
    if visible and odd / len(visible) > MAX_ODD_SHARE:
        return True
    tokens = [t for t in text.split() if any(ch.isalnum() for ch in t)]
    if not tokens:
        return False
    words = sum(bool(_LETTERS.search(t) or _NUMBER.match(t)) for t in tokens)
    return words / len(tokens) < MIN_WORD_SHARE
