"""ParsedDocument -> Chunks: passages of at most `size` characters, with overlap.

Every chunk is a contiguous slice of its section's text, so its line range is exact and
its words are the source's words. A chunk ends at the best break the window offers:
for prose a blank line, then a line end, then a sentence end, then any space; for code
the start of a top-level definition, then a blank line, then a line end, then a space.
A break must leave the chunk reasonably full (otherwise one short paragraph followed by
a long one would make a chunk of a few words). Nothing is ever cut inside a word, except
a single "word" longer than `size` (a hash, a base64 blob, a minified line), which must
be cut somewhere.

The next chunk starts with the previous one's tail (at most `overlap` characters,
starting at a word, or for code at a line), so a fact that straddles a break is whole
in one of the two chunks. Chunks never cross sections: a PDF page or a Markdown heading
section always starts a fresh chunk.

Break points are searched for in the window only, with C-level `str.rfind` and compiled
regexes, so chunking costs a few microseconds per chunk whatever the document size.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator

from localgpt_cli.errors import InvalidInput, UsageError
from localgpt_cli.rag.types import Chunk, ParsedDocument, Section

# Prose: 800 characters with 120 of overlap. On Cranfield with all-minilm (python -m
# tests.bench.retrieval) nDCG@10 keyword / vector / hybrid is 0.357 / 0.361 / 0.389 at
# 500/80, 0.372 / 0.363 / 0.406 at 800/120 and 0.369 / 0.376 / 0.403 at 1000/150: a short
# chunk loses the context its document states once (the title, the subject). 800
# characters (~200 tokens) stay inside small embedding models' windows (all-minilm reads
# 256 tokens) and keep five retrieved passages near 1,000 tokens of a chat's context.
PROSE_SIZE = 800
PROSE_OVERLAP = 120
CODE_SIZE = 400
CODE_OVERLAP = 60
MIN_SIZE = 50
DEFAULT_MAX_CHUNKS = 2000

BLANK_LINE = re.compile(r"\n[ \t]*\n")
# A sentence ends at . ! ? before a space, or at CJK full stops, which take no space.
SENTENCE_END = re.compile(r"[.!?…][\"'’”)\]»]*(?=[ \t\n])|[。！？][」』”）]*")
# Any whitespace, as str.split() and str.isspace() see it: chunk edges must agree
# with what a test (or a user) calls a word.
SPACE_RUN = re.compile(r"\s+")
LAST_SPACE = re.compile(r"\s\S*\Z")  # searched with endpos: the last space before it
# A line that starts a top-level definition in the languages users keep in their trees.
# Only column-0 lines count: methods inside a class stay with the class where they fit.
# It starts with the newline before the line: a literal prefix lets the regex engine skip
# from newline to newline instead of trying every position.
DEFINITION = re.compile(
    r"\n(?:export[ \t]+(?:default[ \t]+)?)?"
    r"(?:(?:pub(?:\([\w:]+\))?|public|private|protected|internal|static|final|abstract|"
    r"sealed|open|data|case|inline|async|unsafe|override|local|extern|const|template<[^>]*>)"
    r"[ \t]+)*"
    r"(?:def|class|function\*?|func|fn|fun|struct|enum|union|trait|impl|interface|protocol|"
    r"extension|module|object|mod|namespace|type|macro_rules!|(?i:create)\s+\w+)[\s(<{:]",
)
# Every newline where DEFINITION matches, and (group 1) the rest of that match: it takes
# one character, so a match starting inside another is found too.
_DEFINITION_AT = re.compile(r"\n(?=(" + DEFINITION.pattern[2:] + "))")
# Lines that belong to the definition below them: decorators, attributes, doc comments.
PREAMBLE = ("@", "#", "//", "/*", "*", "--", ";", "'''", '"""')
MAX_PREAMBLE_LINES = 30

Finder = Callable[[str, int, int, int], int]


def default_limits(doc_type: str) -> tuple[int, int]:
    """(size, overlap) in characters for a document type when the user sets neither."""
    return (CODE_SIZE, CODE_OVERLAP) if doc_type == "code" else (PROSE_SIZE, PROSE_OVERLAP)


def resolve_limits(doc_type: str, size: int | None, overlap: int | None) -> tuple[int, int]:
    """Apply defaults and validate; a size given alone keeps the overlap at most a fifth.

    `--chunk-size 100` alone should not inherit an 80-character overlap that would make
    every chunk mostly repetition.
    """
    default_size, default_overlap = default_limits(doc_type)
    if size is None:
        size = default_size
    if overlap is None:
        overlap = min(default_overlap, size // 5)
    if size < MIN_SIZE:
        raise UsageError(f"--chunk-size must be at least {MIN_SIZE} characters (got {size})")
    if overlap < 0:
        raise UsageError(f"--chunk-overlap cannot be negative (got {overlap})")
    if overlap >= size:
        raise UsageError(f"--chunk-overlap ({overlap}) must be smaller than --chunk-size ({size})")
    return size, overlap


def chunk_document(
    doc: ParsedDocument,
    document_id: str,
    *,
    size: int | None = None,
    overlap: int | None = None,
    max_chunks: int = DEFAULT_MAX_CHUNKS,
) -> list[Chunk]:
    """Cut every section of `doc` into chunks; ordinals run 0.. across the document.

    Raises UsageError for bad size/overlap, InvalidInput (code `too_many_chunks`) when
    the document would make more than `max_chunks` chunks.
    """
    return [
        Chunk(
            document_id=document_id,
            path=doc.path,
            type=doc.type,
            ordinal=ordinal,
            text=section.text[start:end],
            page=section.page,
            heading=section.heading,
            line_start=line_start,
            line_end=line_end,
            ocr_confidence=section.ocr_confidence,
        )
        for ordinal, (section, start, end, line_start, line_end) in enumerate(
            chunk_spans(doc, size=size, overlap=overlap, max_chunks=max_chunks)
        )
    ]


def chunk_spans(
    doc: ParsedDocument,
    *,
    size: int | None = None,
    overlap: int | None = None,
    max_chunks: int = DEFAULT_MAX_CHUNKS,
) -> Iterator[tuple[Section, int, int, int | None, int | None]]:
    """Each chunk of `doc` as (section, start, end, first line, last line): what
    `chunk_document` makes its `Chunk`s of, for a caller that wants their fields as
    columns without an object per chunk (ingest's `parsing.Rows`). Raises as it does,
    before yielding anything."""
    size, overlap = resolve_limits(doc.type, size, overlap)
    is_code = doc.type == "code"
    plans = [split_spans(s.text, size, overlap, code=is_code) for s in doc.sections]
    total = sum(len(spans) for spans in plans)
    if total > max_chunks:
        raise InvalidInput(
            f"{doc.path}: {total} chunks > {max_chunks} limit (raise with --max-chunks)",
            code="too_many_chunks",
        )
    return _spans(doc.sections, plans)


def _spans(
    sections: list[Section], plans: list[list[tuple[int, int]]]
) -> Iterator[tuple[Section, int, int, int | None, int | None]]:
    for section, spans in zip(sections, plans, strict=True):
        first_line = section.line_start
        if first_line is None:
            for start, end in spans:
                yield section, start, end, None, None
            continue
        text = section.text
        # Starts and ends both only move forward, so newlines are counted once each.
        at_start = at_end = 0
        start_line = end_line = first_line
        for start, end in spans:
            start_line += text.count("\n", at_start, start)
            end_line += text.count("\n", at_end, end - 1)
            at_start, at_end = start, end - 1
            yield section, start, end, start_line, end_line


def split_spans(text: str, size: int, overlap: int, *, code: bool = False) -> list[tuple[int, int]]:
    """The (start, end) slices of `text` that become chunks, in order.

    Each slice has no leading or trailing whitespace (code keeps a first line's
    indentation), is at most `size` long, and ends before a space unless it is a cut
    through a word longer than `size`.
    """
    plan: list[tuple[Finder, float]] = (
        [(_Definitions(), 1 / 4), *CODE_PLAN] if code else PROSE_PLAN
    )
    spans: list[tuple[int, int]] = []
    floor = 0  # where the text not yet in any chunk begins
    start = len(text)  # where the previous chunk's tail begins; none yet
    while True:
        word = _skip_spaces(text, floor)
        if word >= len(text):
            return spans
        fresh = _line_aware_start(text, floor, code)
        start, end, hard_cut = _place(text, min(start, fresh), fresh, word, size, plan)
        spans.append((start, end))
        floor = end
        tail = None if hard_cut or not overlap else _overlap_start(text, start, end, overlap, code)
        start = tail if tail is not None else len(text)


def _place(
    text: str, start: int, fresh: int, word: int, size: int, plan: list[tuple[Finder, float]]
) -> tuple[int, int, bool]:
    """Start, end and hard-cut flag of the next chunk.

    It starts at `start` (with the previous chunk's tail) if a break fits, else at
    `fresh` (no overlap), else at `word` (without a code line's indentation), else it
    is a hard cut through a word longer than `size`.
    """
    n = len(text)
    for begin in dict.fromkeys((start, fresh, word)):
        if n - begin <= size:
            return begin, _trim_end(text, n), False
        end = _find_break(text, begin, size, word, plan)
        if end >= 0:
            return begin, end, False
    return word, word + size, True


def _find_break(
    text: str, start: int, size: int, word: int, plan: list[tuple[Finder, float]]
) -> int:
    """The end of the chunk starting at `start`, or -1 if no break lies in (word, start+size].

    `word` is the first character not yet in any chunk; a break before it would make no
    progress.
    """
    limit = start + size
    for finder, fill in plan:
        lo = max(start + int(size * fill), word + 1)
        if lo > limit:
            continue
        at = finder(text, lo, limit, start)
        if at >= 0:
            return _trim_end(text, at)
    return -1


# -- finders: the last break position q in [lo, hi] (text[q] is whitespace), or -1 --------


def _blank_line(text: str, lo: int, hi: int, start: int) -> int:
    last = -1
    for m in BLANK_LINE.finditer(text, lo, hi + 64):
        if m.start() > hi:
            break
        last = m.start()
    return last


def _line_end(text: str, lo: int, hi: int, start: int) -> int:
    return text.rfind("\n", lo, hi + 1)


def _sentence_end(text: str, lo: int, hi: int, start: int) -> int:
    last = -1
    for m in SENTENCE_END.finditer(text, max(start, lo - 4), hi + 2):
        if lo <= m.end() <= hi:
            last = m.end()
    return last


def _space(text: str, lo: int, hi: int, start: int) -> int:
    hi += 1
    found = max(text.rfind(" ", lo, hi), text.rfind("\n", lo, hi), text.rfind("\t", lo, hi))
    if found < 0:  # rare: only exotic spaces (NBSP, ideographic space, form feed)
        m = LAST_SPACE.search(text, lo, hi)
        found = m.start() if m else -1
    return found


class _Definitions:
    """The finder of top-level definitions in one code text: the newline before the
    latest definition in [lo, hi] (and its decorators/comments). Its matches are found
    once, on first use: a code file's windows overlap, and scanning each again was a
    tenth of parsing the benchmark corpus. It gives what `DEFINITION.finditer(text, lo,
    hi + 200)` gives: a match found with no end bound is the windowed search's own when
    it ends inside the window (the pattern has no lookaround or anchor, so a bound can
    only take matches away); one that ends past it is searched for again within it."""

    def __init__(self) -> None:
        self.starts: list[int] | None = None
        self.ends: list[int] = []

    def _find(self, text: str) -> list[int]:
        starts = []
        for m in _DEFINITION_AT.finditer(text):
            starts.append(m.start())
            self.ends.append(m.end(1))
        return starts

    def __call__(self, text: str, lo: int, hi: int, start: int) -> int:
        if self.starts is None:
            self.starts = self._find(text)
        starts = self.starts
        last = -1
        bound = hi + 200
        cursor = lo  # where the windowed search goes on from
        for i in range(bisect_left(starts, lo), len(starts)):
            q = starts[i]
            if q < cursor:
                continue  # inside the match before it
            if q > hi:
                break
            end = self.ends[i]
            if end > bound:
                m = DEFINITION.match(text, q, bound)
                if m is None:
                    continue
                end = m.end()
            cursor = end
            for _ in range(MAX_PREAMBLE_LINES):
                prev = text.rfind("\n", start, q)
                if prev < 0 or not text[prev + 1 : q].lstrip().startswith(PREAMBLE):
                    break
                q = prev
            if q >= lo:
                last = q
        return last


PROSE_PLAN: list[tuple[Finder, float]] = [
    (_blank_line, 1 / 3),
    (_line_end, 1 / 2),
    (_sentence_end, 1 / 2),
    (_space, 1 / 2),
    (_space, 0.0),
]
# After the definitions (1/4: `_Definitions`, one per text):
CODE_PLAN: list[tuple[Finder, float]] = [
    (_blank_line, 1 / 3),
    (_line_end, 1 / 2),
    (_space, 1 / 2),
    (_space, 0.0),
]


# -- positions -------------------------------------------------------------------------


def _skip_spaces(text: str, pos: int) -> int:
    m = SPACE_RUN.match(text, pos)
    return m.end() if m else pos


def _trim_end(text: str, end: int) -> int:
    """Move `end` back over trailing whitespace."""
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def _line_aware_start(text: str, pos: int, code: bool) -> int:
    """First word at or after `pos`; for code, the start of its line (keeps indentation)."""
    word = _skip_spaces(text, pos)
    if not code:
        return word
    newline = text.rfind("\n", pos, word)
    if newline >= 0:
        line = newline + 1
    elif pos == 0:
        line = 0
    else:
        return word
    return line if not text[line:word].strip(" \t") else word


def _overlap_start(text: str, start: int, end: int, overlap: int, code: bool) -> int | None:
    """Where the tail of chunk [start, end) that the next chunk repeats begins, if any.

    The tail is at most `overlap` characters and begins at a word (for code: at a line
    if one begins in the tail) after `start`, so it is always a proper suffix.
    """
    lo = max(end - overlap - 1, start)
    if code:
        newline = text.find("\n", lo, end)
        if newline >= 0:
            line = _line_aware_start(text, newline, code)
            if _skip_spaces(text, line) < end:
                return line
    m = SPACE_RUN.search(text, lo, end)
    if m is None or m.end() >= end:
        return None
    return m.end()
