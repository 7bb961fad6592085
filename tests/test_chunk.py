"""chunk_document: sizes, overlap, word boundaries, line ranges, sections, limits."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localgpt_cli.errors import InvalidInput, UsageError
from localgpt_cli.rag.chunk import (
    CODE_OVERLAP,
    CODE_SIZE,
    PROSE_OVERLAP,
    PROSE_SIZE,
    chunk_document,
    resolve_limits,
    split_spans,
)
from localgpt_cli.rag.parse import parse_file
from localgpt_cli.rag.types import Chunk, ParsedDocument, Section
from tests.pdfgen import make_pdf


def prose(n_words: int, seed: int = 0) -> str:
    """Paragraphs of sentences of distinct words (w0, w1, ...), some hard-wrapped."""
    rng = random.Random(seed)
    out: list[str] = []
    i = 0
    while i < n_words:
        sentence = []
        for _ in range(rng.randint(4, 18)):
            if i == n_words:
                break
            sentence.append(f"w{i}" + "x" * rng.randint(0, 9))
            i += 1
        out.append(" ".join(sentence) + ".")
        out.append(rng.choice([" ", " ", " ", "\n", "\n\n"]))
    return "".join(out)


def doc_of(text: str, doc_type: str = "text") -> ParsedDocument:
    return ParsedDocument(path="mem.txt", type=doc_type, sections=[Section(text, line_start=1)])


def overlap_of(prev: Chunk, nxt: Chunk) -> str:
    """The longest suffix of prev that starts at a word and is a prefix of nxt."""
    for k in range(min(len(prev.text), len(nxt.text)), 0, -1):
        tail = prev.text[-k:]
        if nxt.text.startswith(tail) and (k == len(prev.text) or prev.text[-k - 1].isspace()):
            return tail
    return ""


def assert_whole_words(chunks: list[Chunk], source: str) -> None:
    words = set(source.split())
    for chunk in chunks:
        for token in chunk.text.split():
            assert token in words, f"{token!r} is a piece of a word (chunk {chunk.ordinal})"


# -- limits ----------------------------------------------------------------------------


def test_defaults_depend_on_type() -> None:
    assert resolve_limits("text", None, None) == (PROSE_SIZE, PROSE_OVERLAP) == (800, 120)
    assert resolve_limits("pdf", None, None) == (800, 120)
    assert resolve_limits("code", None, None) == (CODE_SIZE, CODE_OVERLAP) == (400, 60)
    assert resolve_limits("text", 100, None) == (100, 20)  # overlap kept to a fifth
    assert resolve_limits("code", 1000, None) == (1000, 60)
    assert resolve_limits("text", None, 0) == (800, 0)


@pytest.mark.parametrize(
    ("size", "overlap", "message"),
    [
        (100, 100, "--chunk-overlap (100) must be smaller than --chunk-size (100)"),
        (100, 150, "--chunk-overlap (150) must be smaller than --chunk-size (100)"),
        (49, 10, "--chunk-size must be at least 50 characters (got 49)"),
        (100, -1, "--chunk-overlap cannot be negative (got -1)"),
    ],
)
def test_bad_limits_are_usage_errors(size: int, overlap: int, message: str) -> None:
    with pytest.raises(UsageError) as err:
        chunk_document(doc_of("some words here"), "d", size=size, overlap=overlap)
    assert str(err.value) == message


def test_too_many_chunks_is_invalid_input() -> None:
    doc = doc_of(prose(2000))
    with pytest.raises(InvalidInput) as err:
        chunk_document(doc, "d", size=100, overlap=0, max_chunks=10)
    assert err.value.code == "too_many_chunks"
    n = len(chunk_document(doc, "d", size=100, overlap=0, max_chunks=10_000))
    assert str(err.value) == f"mem.txt: {n} chunks > 10 limit (raise with --max-chunks)"


# -- shape of chunks -------------------------------------------------------------------


@pytest.mark.parametrize(("size", "overlap"), [(500, 80), (200, 40), (50, 20), (120, 0)])
def test_sizes_words_and_overlap(size: int, overlap: int) -> None:
    text = prose(3000, seed=size)
    chunks = chunk_document(doc_of(text), "doc-1", size=size, overlap=overlap)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert all(len(c.text) <= size for c in chunks)
    assert all(c.text == c.text.strip() and c.text for c in chunks)
    assert all((c.document_id, c.path, c.type) == ("doc-1", "mem.txt", "text") for c in chunks)
    assert_whole_words(chunks, text)
    tails = [overlap_of(a, b) for a, b in zip(chunks, chunks[1:], strict=False)]
    assert all(len(t) <= overlap for t in tails)
    if overlap:
        # Words are at most 15 characters, so every break leaves room for a tail.
        assert all(tails), "every chunk after the first repeats the previous one's tail"
    else:
        assert not any(tails)
    # Chunks are well filled: a break is taken only past a third of the size.
    assert all(len(c.text) > size // 4 for c in chunks[:-1])


def test_breaks_prefer_paragraphs_then_lines_then_sentences() -> None:
    para_a = "Alpha " * 40  # 240 characters
    para_b = "Bravo " * 60
    text = para_a.strip() + "\n\n" + para_b.strip()
    first = chunk_document(doc_of(text), "d", size=300, overlap=0)[0]
    assert first.text == para_a.strip()  # the blank line wins over later spaces
    lines = "one two three four five six.\nseven eight nine ten. eleven twelve\n" * 10
    first = chunk_document(doc_of(lines), "d", size=100, overlap=0)[0]
    assert lines.startswith(first.text + "\n")  # ends at a line end
    sentences = "This is one sentence here. " * 10
    first = chunk_document(doc_of(sentences), "d", size=100, overlap=0)[0]
    assert first.text.endswith("here.")


def test_a_word_longer_than_size_is_the_only_thing_cut() -> None:
    giant = "z" * 230 + "END"
    text = f"before the blob {giant} after the blob"
    chunks = chunk_document(doc_of(text), "d", size=100, overlap=20)
    # No overlap into or out of a cut: a tail would only repeat part of the blob.
    assert [c.text for c in chunks] == [
        "before the blob",
        "z" * 100,
        "z" * 100,
        "z" * 30 + "END after the blob",
    ]


def test_empty_and_blank_sections_make_no_chunks() -> None:
    doc = ParsedDocument(path="x", type="text", sections=[Section("  \n\n "), Section("")])
    assert chunk_document(doc, "d") == []
    assert chunk_document(ParsedDocument(path="x", type="text", sections=[]), "d") == []


# -- sections --------------------------------------------------------------------------


def test_chunks_never_cross_sections_and_carry_their_metadata() -> None:
    doc = ParsedDocument(
        path="book.pdf",
        type="pdf",
        sections=[
            Section(prose(150, seed=1).replace("w", "a"), page=1),
            Section(prose(150, seed=2).replace("w", "b"), page=2, heading="Part > Two"),
        ],
    )
    chunks = chunk_document(doc, "d", size=200, overlap=50)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        marks = {token[0] for token in chunk.text.split()}
        assert marks == {"a"} if chunk.page == 1 else marks == {"b"}
        assert chunk.heading == (None if chunk.page == 1 else "Part > Two")
        assert (chunk.line_start, chunk.line_end) == (None, None)
    boundary = next(i for i, c in enumerate(chunks) if c.page == 2)
    assert overlap_of(chunks[boundary - 1], chunks[boundary]) == ""


def test_pdf_chunks_keep_page_numbers(tmp_path: Path) -> None:
    pdf = make_pdf(
        tmp_path / "r.pdf", ["intro words " * 5, "", "\n".join(["revenue rose in q3"] * 40)]
    )
    chunks = chunk_document(parse_file(pdf), "pdf-1")
    assert chunks[0].page == 1 and chunks[0].text.startswith("intro words")
    assert {c.page for c in chunks[1:]} == {3}
    assert all(len(c.text) <= PROSE_SIZE for c in chunks)


# -- line ranges -----------------------------------------------------------------------

MARKDOWN = (
    "---\ntitle: t\n---\n\n# Guide\n\n"
    + prose(200, seed=3)
    + "\n\n## Install\n\n```sh\n# comment in a fence\nmake\n```\n\n"
    + prose(300, seed=4)
    + "\n\n### Linux\n"
    + prose(80, seed=5)
    + "\n"
)


def _python_source() -> str:
    parts = ["import os\nimport sys\n\nCONSTANT = 3\n"]
    for i in range(12):
        body = "".join(f"    value_{j} = helper({i}, {j})  # step {j}\n" for j in range(i % 5 + 2))
        parts.append(f"\n\n@register\ndef function_{i}(arg):\n{body}    return value_0\n")
    parts.append("\n\nclass Service:\n" + "    def method(self):\n        return 1\n\n" * 8)
    return "".join(parts)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("notes.txt", prose(1500, seed=7)),
        ("guide.md", MARKDOWN),
        ("tool.py", _python_source()),
        ("crlf.txt", prose(400, seed=8).replace("\n", "\r\n")),
    ],
)
def test_line_ranges_slice_the_source(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_bytes(content.encode())
    chunks = chunk_document(parse_file(path), "d")
    assert len(chunks) > 3
    with open(path, encoding="utf-8") as fh:  # text mode: how an editor counts lines
        lines = fh.read().split("\n")
    for chunk in chunks:
        assert chunk.line_start is not None and chunk.line_end is not None
        assert 1 <= chunk.line_start <= chunk.line_end <= len(lines)
        window = "\n".join(lines[chunk.line_start - 1 : chunk.line_end])
        assert chunk.text in window
        # ... and the range is tight: the first and last lines hold the chunk's ends.
        assert chunk.text.split("\n")[0] in lines[chunk.line_start - 1]
        assert chunk.text.split("\n")[-1] in lines[chunk.line_end - 1]


def test_markdown_chunks_carry_heading_paths(tmp_path: Path) -> None:
    path = tmp_path / "guide.md"
    path.write_text(MARKDOWN)
    chunks = chunk_document(parse_file(path), "d")
    order = ["Guide", "Guide > Install", "Guide > Install > Linux"]
    headings = [c.heading for c in chunks]
    assert headings == sorted(headings, key=lambda h: order.index(h or ""))
    assert set(headings) == set(order)
    assert "comment in a fence" in next(c.text for c in chunks if c.heading == "Guide > Install")


# -- code ------------------------------------------------------------------------------


def test_code_chunks_start_at_definitions() -> None:
    source = _python_source()
    doc = ParsedDocument(
        path="tool.py", type="code", language="py", sections=[Section(source, line_start=1)]
    )
    chunks = chunk_document(doc, "d", overlap=0)
    assert all(len(c.text) <= CODE_SIZE for c in chunks)
    # Every function (with its decorator) is whole in one chunk.
    for i in range(12):
        assert sum(f"@register\ndef function_{i}(arg):" in c.text for c in chunks) == 1
        body = next(c.text for c in chunks if f"def function_{i}(" in c.text)
        assert f"helper({i}, {i % 5 + 1})" in body
    # Chunks after the imports begin at a decorator or a top-level definition.
    starts = [c.text.split("\n")[0] for c in chunks[1:]]
    assert all(s.startswith(("@register", "class ", "    def ")) for s in starts), starts


def test_definitions_beat_blank_lines_inside_functions() -> None:
    # Go-style: no blank line between functions, blank lines inside them. Cutting at
    # the blank lines would split every function; cutting at `func` keeps them whole.
    funcs = [
        f"// handler{i} serves route {i}.\n"
        f"func handler{i}(w http.ResponseWriter, r *http.Request) {{\n"
        f"\tstart := time.Now()\n\n\tserve(w, r, {i})\n\n\tlog.Since(start)\n}}\n"
        for i in range(20)
    ]
    source = "package main\n" + "".join(funcs)
    doc = ParsedDocument(path="h.go", type="code", sections=[Section(source, line_start=1)])
    chunks = chunk_document(doc, "d", overlap=0)
    for i in range(20):
        assert sum(funcs[i].strip() in c.text for c in chunks) == 1, i
    assert all(c.text.startswith("// handler") for c in chunks[1:])


def test_code_overlap_starts_at_a_line_and_keeps_indentation() -> None:
    source = "".join(f"    total += compute(item_{i}, factor={i})\n" for i in range(60))
    doc = ParsedDocument(path="a.py", type="code", sections=[Section(source, line_start=1)])
    chunks = chunk_document(doc, "d")
    assert len(chunks) > 3
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        assert nxt.text.startswith("    total += ")
        tail = overlap_of(prev, nxt)
        assert tail.startswith("    total") and len(tail) <= CODE_OVERLAP


# -- property --------------------------------------------------------------------------

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC.,!?;:'\"()-", min_size=1, max_size=24)
SEPARATOR = st.sampled_from([" ", " ", " ", "  ", "\n", "\n\n", "\t", " \n ", "\n\n\n"])


@st.composite
def texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Text of unique words (each suffixed with its index) joined by random whitespace."""
    words = [f"{w}#{i}" for i, w in enumerate(draw(st.lists(WORD, min_size=1, max_size=300)))]
    seps = draw(st.lists(SEPARATOR, min_size=len(words), max_size=len(words)))
    lead = draw(st.sampled_from(["", " ", "\n\n"]))
    return lead + "".join(w + s for w, s in zip(words, seps, strict=True)), words


@settings(max_examples=200, deadline=None)
@given(
    sample=texts(),
    size=st.integers(min_value=50, max_value=400),
    ratio=st.floats(min_value=0.0, max_value=0.9),
    doc_type=st.sampled_from(["text", "code"]),
)
def test_chunks_minus_overlaps_are_the_words_in_order(
    sample: tuple[str, list[str]], size: int, ratio: float, doc_type: str
) -> None:
    text, words = sample
    overlap = int(size * ratio)
    chunks = chunk_document(doc_of(text, doc_type), "d", size=size, overlap=overlap)
    rebuilt: list[str] = []
    for n, chunk in enumerate(chunks):
        assert len(chunk.text) <= size
        tokens = chunk.text.split()
        if n:
            # The tail repeated from the previous chunk is whole words (unique ones,
            # so the repetition can be found without knowing the offsets).
            tail = overlap_of(chunks[n - 1], chunk)
            assert len(tail) <= overlap
            tokens = tokens[len(tail.split()) :]
        rebuilt.extend(tokens)
    assert rebuilt == words
    text_lines = text.split("\n")
    for chunk in chunks:
        assert chunk.line_start is not None
        window = "\n".join(text_lines[chunk.line_start - 1 : chunk.line_end])
        assert chunk.text in window


PIECES = st.sampled_from([*"ab .。\n\t\xa0\x0b\x0c\u3000\u2028é中#()", "def ", "\n@", "x" * 60])


@settings(max_examples=300, deadline=None)
@given(
    text=st.lists(PIECES, max_size=300).map("".join),
    size=st.integers(min_value=50, max_value=120),
    overlap=st.integers(min_value=0, max_value=49),
    code=st.booleans(),
)
def test_any_text_is_covered_by_spans_within_size(
    text: str, size: int, overlap: int, code: bool
) -> None:
    """Whatever the whitespace (NBSP, form feed, CJK space), every non-space character
    lands in a chunk, no chunk is longer than size or starts/ends with whitespace
    (code may keep indentation), and chunking terminates."""
    spans = split_spans(text, size, overlap, code=code)
    covered = bytearray(len(text))
    prev_start = prev_end = -1
    for start, end in spans:
        assert 0 <= start < end <= len(text)
        assert end - start <= size
        assert start > prev_start and end > prev_end
        assert not text[end - 1].isspace()
        assert not text[start].isspace() or (code and text[start] in " \t")
        covered[start:end] = b"\x01" * (end - start)
        prev_start, prev_end = start, end
    assert all(covered[i] or ch.isspace() for i, ch in enumerate(text))
