"""A BERT-family sentence encoder in NumPy: the forward pass behind the local embedder.

Reads a sentence-transformers model directory (`config.json`, `model.safetensors`, and
optionally `sentence_bert_config.json`, `1_Pooling/config.json`, `modules.json`) and runs
it as sentence-transformers does: BERT (post-LayerNorm, exact-erf GELU), pooling over the
attention mask (mean, CLS or max), then L2 normalisation when the model's modules ask for
it. The weights are read from `model.safetensors` here (load_weights), not through a
library. This module imports numpy at the top: llm/local.py imports it only when a model
is loaded, so no command that does not embed locally pays for it.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from localgpt_cli.errors import InvalidInput

# Tokens per block of the token-wise steps (projections, layer norms, feed-forward):
# large enough that each matrix product runs at full speed, small enough that a block's
# feed-forward temporaries (ROWS x 4 hidden floats each) stay a few MB.
ROWS = 512


@dataclass(frozen=True)
class BertConfig:
    """What the forward pass needs from a model directory's configuration files."""

    hidden: int
    heads: int
    layers: int
    eps: float
    max_tokens: int
    pooling: str  # "mean", "cls" or "max"
    normalize: bool

    @classmethod
    def read(cls, directory: Path) -> BertConfig:
        config = _json(directory / "config.json") or {}
        sbert = _json(directory / "sentence_bert_config.json") or {}
        pool = _json(directory / "1_Pooling" / "config.json") or {}
        modules = _json(directory / "modules.json")
        max_positions = int(config.get("max_position_embeddings", 512))
        pooling = "mean"
        if pool.get("pooling_mode_cls_token"):
            pooling = "cls"
        elif pool.get("pooling_mode_max_tokens"):
            pooling = "max"
        normalize = True if modules is None else any(
            str(m.get("type", "")).endswith("Normalize") for m in modules
        )
        return cls(
            hidden=int(config["hidden_size"]),
            heads=int(config["num_attention_heads"]),
            layers=int(config["num_hidden_layers"]),
            eps=float(config.get("layer_norm_eps", 1e-12)),
            max_tokens=min(int(sbert.get("max_seq_length", max_positions)), max_positions),
            pooling=pooling,
            normalize=normalize,
        )


def _json(path: Path) -> Any:
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))


def _gelu(h: Any) -> Any:
    """Exact-erf GELU of `h`, in place (`h` is overwritten and returned), with three
    temporaries of its size where the plain expressions held seven: `h` is the
    feed-forward's (ROWS x 4 hidden) block, 3 MB each. erf in float32 (NumPy has none;
    scipy is not a dependency): Abramowitz & Stegun 7.1.26, absolute error under 1.5e-7,
    below float32 resolution for GELU's inputs. The operations and their order are those
    of 0.5 * h * (1 + erf(h / sqrt 2)), so the vectors are the same to the bit."""
    u = h * np.float32(0.7071067811865476)
    a = np.abs(u)
    t = np.float32(0.3275911) * a
    t += 1.0
    np.divide(1.0, t, out=t)
    poly = t * 1.061405429
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += c
        poly *= t
    del t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    del a
    np.subtract(1.0, poly, out=poly)
    np.sign(u, out=u)
    poly *= u
    del u
    poly += 1.0
    h *= 0.5
    h *= poly
    return h


def _layer_norm(x: Any, params: tuple[Any, Any], eps: float) -> Any:
    weight, bias = params
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


# safetensors dtype -> NumPy dtype read from the file (little-endian, as the format says).
_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2"}


def load_weights(path: Path, layers: int) -> dict[str, Any]:
    """The tensors of `model.safetensors`, rearranged for the forward pass: query, key and
    value as one (hidden, 3*hidden) matrix, every matrix transposed to (in, out), token
    type 0 folded into the position embeddings (a single sentence has no second segment).

    Read one tensor at a time with plain reads, so loading holds the weights once plus one
    tensor. The `safetensors` library maps the whole file: its pages count in the
    process's RSS until it is closed, and all-MiniLM-L6-v2 took 174 MB at the peak of its
    load for 87 MB of weights (88 MB read this way; `python -m tests.bench.local_memory`).
    The format is a little-endian u64 header length, a JSON header (name -> dtype, shape,
    byte offsets after the header), then the raw tensors."""
    with open(path, "rb") as fh:
        header, data, available = _header(fh, path)
        names = {k.removeprefix("bert."): k for k in header if k != "__metadata__"}

        def get(name: str) -> Any:
            if name not in names:
                raise InvalidInput(
                    f"{path} holds no tensor {name}: the local embedder runs BERT models.",
                    hint="Use a sentence-transformers BERT model (all-MiniLM-L6-v2 and kin).",
                )
            meta = header[names[name]]
            kind = meta.get("dtype") if isinstance(meta, dict) else None
            if not isinstance(kind, str):
                raise _damaged(path, f"tensor {names[name]} has no dtype")
            if kind not in _DTYPES:
                raise InvalidInput(
                    f"{path}: tensor {names[name]} is {kind}; the local embedder "
                    f"reads {', '.join(_DTYPES)} weights.",
                    hint="Use the model's float32 or float16 safetensors file.",
                )
            dtype = np.dtype(_DTYPES[kind])
            begin, count, shape = _span(meta, dtype.itemsize, available, path, names[name])
            fh.seek(data + begin)
            raw = np.fromfile(fh, dtype=dtype, count=count)
            if kind == "BF16":  # the top half of a float32
                raw = (raw.astype(np.uint32) << 16).view(np.float32)
            return raw.reshape(shape)

        return _arrange(get, layers)


def _header(fh: Any, path: Path) -> tuple[dict[str, Any], int, int]:
    """The JSON header of the safetensors file open as `fh`, where its tensors start and
    how many bytes follow the header; one line (InvalidInput) for a damaged or truncated
    file rather than a failure deep in the load."""
    total = os.fstat(fh.fileno()).st_size
    size = int.from_bytes(fh.read(8), "little")
    if total < 8 or size > total - 8:
        raise _damaged(path, f"its header needs {size} bytes, the file holds {max(total - 8, 0)}")
    try:
        header = json.loads(fh.read(size))
    except ValueError:  # bad JSON or bad UTF-8
        header = None
    if not isinstance(header, dict):
        raise _damaged(path, "its header is not a JSON object")
    return header, 8 + size, total - 8 - size


def _span(meta: dict[str, Any], itemsize: int, available: int, path: Path,
          name: str) -> tuple[int, int, list[int]]:  # fmt: skip
    """(first byte after the header, element count, shape) of one tensor, checked against
    the bytes the file holds after its header (`available`)."""
    try:
        begin, end = (int(x) for x in meta["data_offsets"])
        shape = [int(n) for n in meta["shape"]]
    except (KeyError, TypeError, ValueError):
        raise _damaged(path, f"tensor {name} has no valid offsets and shape") from None
    count = math.prod(shape)
    if not 0 <= begin <= end <= available or min(shape, default=0) < 0 \
            or end - begin != count * itemsize:  # fmt: skip
        raise _damaged(path, f"tensor {name} lies at bytes {begin}-{end} of the "
                       f"{available} after the header, for shape {shape}")
    return begin, count, shape


def _damaged(path: Path, what: str) -> InvalidInput:
    return InvalidInput(
        f"{path} is not a readable safetensors file: {what}.",
        hint="It is damaged or incomplete: download or copy the model's files again.",
    )


def _arrange(get: Any, layers: int) -> dict[str, Any]:
    """The forward pass's weights from `get(tensor name)` (see load_weights)."""

    def t(name: str) -> Any:
        return np.ascontiguousarray(get(name).T, dtype=np.float32)

    def f(name: str) -> Any:
        return np.asarray(get(name), dtype=np.float32)

    w: dict[str, Any] = {
        "word": f("embeddings.word_embeddings.weight"),
        "pos": f("embeddings.position_embeddings.weight")
        + f("embeddings.token_type_embeddings.weight")[0],
        "emb_ln": (f("embeddings.LayerNorm.weight"), f("embeddings.LayerNorm.bias")),
    }
    for i in range(layers):
        p = f"encoder.layer.{i}."
        a = p + "attention."
        names = ("query", "key", "value")
        w[f"{i}.qkv"] = np.ascontiguousarray(
            np.concatenate([f(a + f"self.{n}.weight") for n in names]).T
        )
        w[f"{i}.qkv_b"] = np.concatenate([f(a + f"self.{n}.bias") for n in names])
        w[f"{i}.ao"], w[f"{i}.ao_b"] = t(a + "output.dense.weight"), f(a + "output.dense.bias")
        w[f"{i}.ln1"] = (f(a + "output.LayerNorm.weight"), f(a + "output.LayerNorm.bias"))
        w[f"{i}.in"] = t(p + "intermediate.dense.weight")
        w[f"{i}.in_b"] = f(p + "intermediate.dense.bias")
        w[f"{i}.out"], w[f"{i}.out_b"] = t(p + "output.dense.weight"), f(p + "output.dense.bias")
        w[f"{i}.ln2"] = (f(p + "output.LayerNorm.weight"), f(p + "output.LayerNorm.bias"))
    return w


def encode(cfg: BertConfig, w: dict[str, Any], ids: list[Any]) -> Any:
    """Sentence vectors (float32, one row per sequence) for token-id sequences.

    The batch's real tokens are packed into one (tokens, hidden) matrix, never padded:
    attention runs per sequence over its own length (what the padded, masked form
    computes, without the masked work). Each layer runs span by span (_spans: whole
    sequences, ROWS tokens together), attention then the token-wise steps, so besides the
    batch's hidden states the working memory is one span's context, its feed-forward
    block (ROWS x 4 hidden) and one sequence's scores. Two batches of 32 x 256 tokens at
    once (two cores) took 1.1-1.3 GB above the loaded model before issue 30; the padded
    scores gone, 110 MB; with the context held per span, the embedding layer in blocks
    and GELU in place, ~60 MB (`python -m tests.bench.local_memory`).
    """
    lengths = [len(x) for x in ids]
    starts = np.cumsum([0, *lengths[:-1]])
    x = _embeddings(cfg, w, np.concatenate(ids), lengths)
    spans = [(int(starts[lo]), sum(lengths[lo:hi]), lengths[lo:hi]) for lo, hi in _spans(lengths)]
    for i in range(cfg.layers):
        for start, count, span in spans:
            rows = slice(start, start + count)
            ctx = _attention(cfg, w, i, x[rows], span)
            a = ctx @ w[f"{i}.ao"]
            a += w[f"{i}.ao_b"]
            a += x[rows]
            a = _layer_norm(a, w[f"{i}.ln1"], cfg.eps)
            hidden = a @ w[f"{i}.in"]
            hidden += w[f"{i}.in_b"]
            _gelu(hidden)
            out = hidden @ w[f"{i}.out"]
            out += w[f"{i}.out_b"]
            out += a
            x[rows] = _layer_norm(out, w[f"{i}.ln2"], cfg.eps)
    pooled = _pool(cfg.pooling, x, starts, np.asarray(lengths))
    if cfg.normalize:
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype(np.float32)


def _embeddings(cfg: BertConfig, w: dict[str, Any], flat: Any, lengths: list[int]) -> Any:
    """The embedding layer's output for the packed tokens, ROWS at a time: done on the
    whole batch at once, its lookups and layer norm held five or six (tokens x hidden)
    temporaries, ~60 MB for a 32 x 256-token batch, ~120 MB with a batch on each core."""
    positions = np.concatenate([np.arange(n) for n in lengths])
    x = np.empty((len(flat), cfg.hidden), dtype=np.float32)
    for r in range(0, len(flat), ROWS):
        block = slice(r, r + ROWS)
        x[block] = _layer_norm(w["word"][flat[block]] + w["pos"][positions[block]],
                               w["emb_ln"], cfg.eps)
    return x


def _spans(lengths: list[int]) -> list[tuple[int, int]]:
    """Runs of consecutive sequences (first, end) of at most ROWS tokens together (a longer
    sequence alone): a layer runs span by span, its attention then its token-wise steps,
    so its context is held for ROWS tokens, not for the whole batch."""
    spans: list[tuple[int, int]] = []
    lo, total = 0, 0
    for j, n in enumerate(lengths):
        if j > lo and total + n > ROWS:
            spans.append((lo, j))
            lo, total = j, 0
        total += n
    spans.append((lo, len(lengths)))
    return spans


def _attention(cfg: BertConfig, w: dict[str, Any], i: int, x: Any, lengths: list[int]) -> Any:
    """Layer `i`'s self-attention output (before its output projection) for the packed
    sequences of `x`, one sequence at a time: each attends to its own tokens only."""
    heads, head = cfg.heads, cfg.hidden // cfg.heads
    scale = np.float32(1.0 / np.sqrt(head))
    ctx = np.empty_like(x)
    start = 0
    for n in lengths:
        qkv = x[start:start + n] @ w[f"{i}.qkv"] + w[f"{i}.qkv_b"]
        q, k, v = qkv.reshape(n, 3, heads, head).transpose(1, 2, 0, 3)
        scores = (q * scale) @ k.transpose(0, 2, 1)
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx[start:start + n] = (scores @ v).transpose(1, 0, 2).reshape(n, cfg.hidden)
        start += n
    return ctx


def _pool(mode: str, x: Any, starts: Any, lengths: Any) -> Any:
    if mode == "cls":
        return x[starts]
    if mode == "max":
        return np.maximum.reduceat(x, starts, axis=0)
    return np.add.reduceat(x, starts, axis=0) / lengths[:, None].astype(np.float32)
