"""The ingest's fast paths give what the plain rules they replace give: the chunker's
definition finder (matches found once per text) against the windowed regex search, the
title check (first characters) against the whole first line, and the hashing of a new
file (one reused buffer) against hashlib over its first `limit + 1` bytes. A difference
would change stored rows or manifest entries, so each is compared on many inputs."""

from __future__ import annotations

import hashlib
import random

from localgpt_cli.rag import chunk, titles
from localgpt_cli.rag.filetypes import SNIFF_BYTES
from localgpt_cli.rag.ingest.plan import HASH_BLOCK, file_sha256


def _windowed(text: str, lo: int, hi: int, start: int) -> int:
    """The definition finder as it was: DEFINITION searched in each window."""
    last = -1
    for m in chunk.DEFINITION.finditer(text, lo, hi + 200):
        q = m.start()
        if q > hi:
            break
        for _ in range(chunk.MAX_PREAMBLE_LINES):
            prev = text.rfind("\n", start, q)
            if prev < 0 or not text[prev + 1 : q].lstrip().startswith(chunk.PREAMBLE):
                break
            q = prev
        if q >= lo:
            last = q
    return last


def test_definitions_found_once_match_the_windowed_search():
    pieces = ["\n", "\nclass X:", "\ndef f(", "\nclass\n", " x = 1", "\n@dec", "\n# c",
              "\ntemplate<" + "a" * 150, "> class Y{", "\npub(crate) fn g<", "\n\t",
              "\nCREATE\n\n   TABLE t(", "\nexport default function* h(", "\n  def m("]  # fmt: skip
    rng = random.Random(2)
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 120)))
        finder = chunk._Definitions()
        for _ in range(8):
            start = rng.randint(0, len(text))
            lo = rng.randint(start, len(text) + 5)
            hi = rng.randint(lo - 3, lo + 500)
            assert finder(text, lo, hi, start) == _windowed(text, lo, hi, start)


def test_the_title_check_matches_the_whole_first_line_rule():
    alphabet = ["a", "b", " ", "#", "\n", "\t", "\u00a0", "\u2028", "\r", "ab", "\x1f", "# a"]
    rng = random.Random(1)
    for _ in range(4000):
        words = ("".join(rng.choice("ab#c") for _ in range(rng.randint(1, 4)))
                 for _ in range(rng.randint(1, 30)))  # fmt: skip
        title = " ".join(" ".join(words).split()) or "a"
        text = rng.choice(["", "#", "##  ", " \n "]) + rng.choice([title, title[:-1], "x"])
        text += "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        if rng.random() < 0.2:
            text = " " * rng.randint(0, 200) + "#" * rng.randint(0, 300) + f" {title}" * 3
        whole = " ".join(titles._first_line(text).lstrip("#").split()).startswith(title)
        assert titles._opens_with(text, title) == whole, (text, title)


def test_a_new_files_hash_and_head_are_its_first_bytes(tmp_path):
    rng = random.Random(3)
    for size in (0, 1, SNIFF_BYTES - 1, SNIFF_BYTES + 1, HASH_BLOCK + 5, 3 * HASH_BLOCK):
        data = rng.randbytes(size)
        path = tmp_path / f"f{size}"
        path.write_bytes(data)
        for limit in (0, 100, SNIFF_BYTES, HASH_BLOCK - 1, HASH_BLOCK, 2 * HASH_BLOCK, 20_000_000):
            digest = hashlib.sha256(data[: limit + 1]).hexdigest()
            assert file_sha256(str(path), limit) == (digest, data[:SNIFF_BYTES])
