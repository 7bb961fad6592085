"""The normalizer: content, thinking, <think> tags (split anywhere), tool calls, done."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from localgpt_cli.kernel.normalize import Normalizer
from localgpt_cli.kernel.packets import PacketFactory
from tests.chunks import chunk


def run(pieces: list[str], **done_kw) -> tuple[str, str, list[dict]]:
    n = Normalizer(PacketFactory())
    packets = []
    for p in pieces:
        packets += n.feed(chunk(p))
    packets += n.feed(chunk("", done=True, done_reason="stop", **done_kw))
    packets += n.finish()
    tokens = "".join(p["payload"] for p in packets if p["type"] == "token")
    thoughts = "".join(p["payload"] for p in packets if p["type"] == "thought")
    assert tokens == n.answer
    return tokens, thoughts, packets


def test_plain_content_becomes_tokens_in_order():
    tokens, thoughts, packets = run(["Hel", "lo", " world"])
    assert tokens == "Hello world"
    assert thoughts == ""
    assert [p["payload"] for p in packets] == ["Hel", "lo", " world"]


def test_thinking_field_becomes_thought_packets():
    n = Normalizer(PacketFactory())
    out = n.feed(chunk("", thinking="Okay, the user"))
    out += n.feed(chunk("Hi", thinking=None))
    assert [(p["type"], p["payload"]) for p in out] == [
        ("thought", "Okay, the user"),
        ("token", "Hi"),
    ]
    assert n.reasoning == "Okay, the user"


def test_one_chunk_with_thinking_and_content_keeps_both():
    n = Normalizer(PacketFactory())
    out = n.feed(chunk("Answer", thinking="Reason"))
    assert [p["type"] for p in out] == ["thought", "token"]


def test_think_tags_inside_content_become_thoughts():
    tokens, thoughts, _ = run(["<think>\nlet me see\n</think>\n\nThe answer is 4."])
    assert thoughts == "let me see\n"
    assert tokens == "The answer is 4."


TEXT = "<think>\nweigh options\n</think>\n\nFinal answer: yes."


def test_tags_split_at_every_boundary_never_leak():
    for i in range(1, len(TEXT)):
        for j in range(i, len(TEXT)):
            tokens, thoughts, _ = run([TEXT[:i], TEXT[i:j], TEXT[j:]])
            assert tokens == "Final answer: yes.", (i, j, tokens)
            assert thoughts == "weigh options\n", (i, j, thoughts)
            assert "<" not in tokens


def test_character_by_character_stream():
    tokens, thoughts, _ = run(list(TEXT))
    assert tokens == "Final answer: yes."
    assert thoughts == "weigh options\n"


def test_a_lone_angle_bracket_is_text():
    tokens, thoughts, _ = run(["a <", "b and 3 < 4 <thi", "nk> is not a tag here"])
    assert tokens == "a <b and 3 < 4 "
    assert thoughts == " is not a tag here"
    tokens, _, _ = run(["x <thi", "nk about it"])
    assert tokens == "x <think about it"


def test_partial_tag_at_end_of_stream_is_flushed_as_text():
    tokens, thoughts, _ = run(["x <thi"])
    assert tokens == "x <thi"
    assert thoughts == ""


def test_unclosed_think_at_end_is_thought():
    tokens, thoughts, _ = run(["<think>still going </thi"])
    assert tokens == ""
    assert thoughts == "still going </thi"


def test_tool_calls_collected_from_any_chunk_including_done():
    n = Normalizer(PacketFactory())
    n.feed(chunk("", tool_calls=[{"name": "a", "arguments": {"x": 1}}]))
    n.feed(chunk("", tool_calls=[{"name": "b", "arguments": {}}], done=True, done_reason="stop"))
    assert [(c.name, c.arguments) for c in n.tool_calls] == [("a", {"x": 1}), ("b", {})]
    assert n.done_reason == "stop"
    assert (n.prompt_eval_count, n.eval_count) == (10, 20)


def test_packet_ids_are_sequential_without_gaps():
    _, _, packets = run(["<think>a</think>b", "c"])
    seqs = [int(p["id"].rsplit(":", 1)[1]) for p in packets]
    assert seqs == list(range(len(packets)))
    assert len({p["id"].split(":")[0] for p in packets}) == 1


@settings(max_examples=200, deadline=None)
@given(
    answer=st.text(alphabet="ab <>/thinkTH\n", min_size=0, max_size=30).filter(
        lambda s: "<think>" not in s and "</think>" not in s
    ),
    reasoning=st.text(alphabet="xy <>/\n", max_size=20).filter(lambda s: "</think>" not in s),
    cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=6),
)
def test_any_split_gives_same_result_as_whole(answer, reasoning, cuts):
    text = f"<think>{reasoning}</think>{answer}"
    whole = run([text])[:2]
    points = sorted({c % (len(text) + 1) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    assert run(pieces)[:2] == whole
