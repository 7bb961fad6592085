"""Measure the NumPy MiniLM and pre-fill its disk cache with Cranfield texts.

    python -m tests.embedder.warm --measure          # vectors/s, batch and thread choices
    python -m tests.embedder.warm docs queries       # cache whole documents and questions
    python -m tests.embedder.warm chunks --size 800 --overlap 120

A benchmark run hits the cache only for the exact texts it embeds, so `chunks` builds them
with the product code: `parse_file`, `chunk_document`, then the embedding input ingest sends
(`document_title` + `embed_body`: the document's title above every chunk but its first).
Without the product chunker it falls back to a plain word-boundary splitter (then the
vectors only help runs that chunk the same way).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from tests.cranfield import document_text, load_corpus, load_queries, write_corpus_files
from tests.embedder.cache import DEFAULT_CACHE_DIR, CachedEmbedder
from tests.embedder.minilm import MiniLM

WHOLE_DOCUMENT = 8000


def word_chunks(text: str, size: int, overlap: int) -> list[str]:
    """Windows of at most `size` characters cut at spaces, each starting about `overlap`
    characters before the previous one ended."""
    chunks = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", start + 1, end)
            end = space if space > start else end
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        space = text.find(" ", end - overlap, end)
        start = space + 1 if space >= 0 else end - overlap
    return chunks


def cranfield_files() -> list[tuple[str, str]]:
    """`(file name, file body)` exactly as `tests.cranfield.write_corpus_files` writes them."""
    return [(f"{doc_id}.txt", document_text(title, text)) for doc_id, title, text in load_corpus()]


def chunk_texts(size: int, overlap: int) -> tuple[list[str], str]:
    """Every Cranfield chunk's embedding input at `size`/`overlap`, and what produced them.

    With the product code present, the files are written and read back through
    `parse_file`, `chunk_document` and `embed_body`, so the texts are byte for byte what
    ingest embeds (all-minilm has no document prefix).
    """
    try:
        from localgpt_cli.rag.chunk import chunk_document
        from localgpt_cli.rag.parse import parse_file
    except ImportError:
        texts = [c for _, body in cranfield_files() for c in word_chunks(body, size, overlap)]
        return texts, "word-boundary fallback"
    from localgpt_cli.rag.titles import document_title, embed_body

    texts = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in write_corpus_files(tmp):
            doc = parse_file(path)
            title = document_title(doc)
            chunks = chunk_document(doc, path.stem, size=size, overlap=overlap)
            texts.extend(embed_body(title, c.text) for c in chunks)
    return texts, "chunk_document + embed_body (titled)"


def measure(size: int, overlap: int) -> None:
    import numpy as np

    windows = [c for _, body in cranfield_files() for c in word_chunks(body, 500, 0)]
    full = [w for w in windows if len(w) >= 450]
    sample = [full[i] for i in np.random.default_rng(0).choice(len(full), 64, replace=False)]
    model = MiniLM()
    model.embed(["load the weights"])
    print(f"500-character chunks, {len(sample)} of them "
          f"(avg {np.mean([len(s) for s in sample]):.0f} chars):")
    rates = {}
    for threads in (1, 2):
        for batch in (1, 8, 32):
            model.batch_size, model.blas_threads = batch, threads
            start = time.perf_counter()
            model.embed(sample)
            rates[threads, batch] = len(sample) / (time.perf_counter() - start)
            print(f"  BLAS threads {threads}, batch {batch:>2}: {rates[threads, batch]:5.1f} vec/s")
    texts, chunker = chunk_texts(size, overlap)
    print(f"Cranfield at {size}/{overlap} ({chunker}): {len(texts)} chunks, "
          f"avg {np.mean([len(t) for t in texts]):.0f} chars; at {rates[1, 1]:.1f} vec/s "
          f"about {len(texts) / rates[1, 1]:.0f} s to embed")


def warm(what: list[str], size: int, overlap: int, cache_dir: Path) -> None:
    groups: dict[str, list[str]] = {}
    if "docs" in what:
        # One chunk per document: the longest Cranfield file is under 4,500 characters.
        groups["docs"], chunker = chunk_texts(WHOLE_DOCUMENT, 0)
        print(f"whole documents by {chunker}", flush=True)
    if "queries" in what:
        groups["queries"] = [text for _, text in load_queries()]
    if "chunks" in what:
        groups["chunks"], chunker = chunk_texts(size, overlap)
        print(f"chunks by {chunker}", flush=True)
    cache = CachedEmbedder(MiniLM(), cache_dir)
    for name, texts in groups.items():
        start = time.perf_counter()
        for i in range(0, len(texts), 64):
            cache.embed_array(texts[i:i + 64])
            done = min(i + 64, len(texts))
            print(f"{name}: {done}/{len(texts)} {time.perf_counter() - start:.0f} s", flush=True)
        again = CachedEmbedder(cache.model, cache_dir)
        start = time.perf_counter()
        again.embed_array(texts)
        print(f"{name}: re-run from cache {time.perf_counter() - start:.2f} s "
              f"({again.hits} hits, {again.misses} misses)", flush=True)
    print(f"cache: {cache.directory} ({len(cache)} vectors)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="*", help="docs, queries and/or chunks")
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--size", type=int, default=800)
    parser.add_argument("--overlap", type=int, default=120)
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    args = parser.parse_args(argv)
    unknown = set(args.what) - {"docs", "queries", "chunks"}
    if unknown:
        parser.error(f"unknown group(s): {', '.join(sorted(unknown))}")
    if args.measure:
        measure(args.size, args.overlap)
    if args.what:
        warm(args.what, args.size, args.overlap, args.cache_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
