"""A BERT-family sentence encoder in NumPy: the forward pass behind the local embedder.

Reads a sentence-transformers model directory (`config.json`, `model.safetensors`, and
optionally `sentence_bert_config.json`, `1_Pooling/config.json`, `modules.json`) and runs
it as sentence-transformers does: BERT (post-LayerNorm, exact-erf GELU), pooling over the
attention mask (mean, CLS or max), then L2 normalisation when the model's modules ask for
it. The weights are read with the `safetensors` library's NumPy loader. This module
imports numpy at the top: llm/local.py imports it only when a model is loaded, so no
command that does not embed locally pays for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


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


def _erf(x: Any) -> Any:
    """erf in float32 (NumPy has none; scipy is not a dependency): Abramowitz & Stegun
    7.1.26, absolute error under 1.5e-7, below float32 resolution for GELU's inputs."""
    a = np.abs(x)
    t = 1.0 / (1.0 + np.float32(0.3275911) * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                                                       + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-a * a))


def _gelu(x: Any) -> Any:
    return 0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476)))


def _layer_norm(x: Any, params: tuple[Any, Any], eps: float) -> Any:
    weight, bias = params
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


def load_weights(path: Path, layers: int) -> dict[str, Any]:
    """The tensors of `model.safetensors`, rearranged for the forward pass: query, key and
    value as one (hidden, 3*hidden) matrix, every matrix transposed to (in, out), token
    type 0 folded into the position embeddings (a single sentence has no second segment)."""
    from safetensors.numpy import load_file

    raw = {k.removeprefix("bert."): v for k, v in load_file(str(path)).items()}

    def t(name: str) -> Any:
        return np.ascontiguousarray(raw[name].T, dtype=np.float32)

    def f(name: str) -> Any:
        return np.asarray(raw[name], dtype=np.float32)

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
    """Sentence vectors (float32, one row per sequence) for token-id sequences, padded to
    the longest of them; padding is masked out of attention and pooling."""
    batch, length = len(ids), max(len(x) for x in ids)
    tokens = np.zeros((batch, length), dtype=np.int64)
    mask = np.zeros((batch, length), dtype=np.float32)
    for row, seq in enumerate(ids):
        tokens[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1.0
    x = _layer_norm(w["word"][tokens] + w["pos"][:length], w["emb_ln"], cfg.eps)
    # Padding keys get the most negative float32, as transformers does.
    bias = None if mask.all() else ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
    head = cfg.hidden // cfg.heads
    scale = np.float32(1.0 / np.sqrt(head))
    for i in range(cfg.layers):
        qkv = x @ w[f"{i}.qkv"] + w[f"{i}.qkv_b"]
        qkv = qkv.reshape(batch, length, 3, cfg.heads, head).transpose(2, 0, 3, 1, 4)
        scores = (qkv[0] * scale) @ qkv[1].transpose(0, 1, 3, 2)
        if bias is not None:
            scores = scores + bias
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch, length, cfg.hidden)
        x = _layer_norm(ctx @ w[f"{i}.ao"] + w[f"{i}.ao_b"] + x, w[f"{i}.ln1"], cfg.eps)
        hidden = _gelu(x @ w[f"{i}.in"] + w[f"{i}.in_b"])
        x = _layer_norm(hidden @ w[f"{i}.out"] + w[f"{i}.out_b"] + x, w[f"{i}.ln2"], cfg.eps)
    pooled = _pool(cfg.pooling, x, mask)
    if cfg.normalize:
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return pooled.astype(np.float32)


def _pool(mode: str, x: Any, mask: Any) -> Any:
    if mode == "cls":
        return x[:, 0]
    if mode == "max":
        return np.where(mask[:, :, None] > 0, x, np.finfo(np.float32).min).max(axis=1)
    return (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)

