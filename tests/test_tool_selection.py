"""Tool selection: core + semantic top-K among many tools, the vector cache, the fallbacks."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from localgpt_cli.tools.selection import Selection, ToolVectorCache, cache_file, select_tools
from tests.bench.tool_selection import CountingEmbed, generated_tools

QUERY = "convert currency: how many euros is 50 dollars?"
DIM = 256


def select(tools: list, embed: object, cache_dir: Path, **kw: object) -> Selection:
    return select_tools(
        tools, kw.pop("message", QUERY), embed=embed, embed_model="m", cache_dir=cache_dir, **kw
    )  # type: ignore[arg-type]


def test_core_tools_and_the_relevant_tool_are_offered(tmp_path: Path) -> None:
    tools = generated_tools(200)
    embed = CountingEmbed(DIM)
    chosen = select(tools, embed, tmp_path)
    assert chosen.method == "semantic" and chosen.warning is None
    assert chosen.offered_names[:4] == ["core_0", "core_1", "core_2", "core_3"]
    assert chosen.offered_names[4] == "convert_currency"  # the best match comes first
    assert len(chosen.tools) == 4 + 6
    assert [t.name for t in chosen.tools] == chosen.offered_names


def test_another_query_selects_other_tools(tmp_path: Path) -> None:
    tools = generated_tools(200)
    message = "please archive the invoice with filters"
    chosen = select(tools, CountingEmbed(DIM), tmp_path, message=message)
    picked = chosen.offered_names[4:]
    assert "convert_currency" not in picked
    best = next(t for t in tools if t.name == picked[0])
    assert message in best.examples


def test_cold_cache_embeds_all_tool_texts_in_one_call(tmp_path: Path) -> None:
    tools = generated_tools(200)
    embed = CountingEmbed(DIM)
    select(tools, embed, tmp_path)
    assert embed.calls == 2
    assert embed.texts[0] == [QUERY]
    assert embed.texts[1] == [t.selection_text() for t in tools if not t.core]
    assert len(embed.texts[1]) == 196
    assert cache_file(tmp_path, "m").is_file()


def test_warm_cache_embeds_only_the_query(tmp_path: Path) -> None:
    tools = generated_tools(200)
    first = select(tools, CountingEmbed(DIM), tmp_path)
    embed = CountingEmbed(DIM)
    again = select(tools, embed, tmp_path)
    assert embed.texts == [[QUERY]]  # no tool text embedded again
    assert again.offered_names == first.offered_names


def test_a_changed_tool_is_the_only_one_embedded_again(tmp_path: Path) -> None:
    tools = generated_tools(200)
    select(tools, CountingEmbed(DIM), tmp_path)
    tools[10].description = "A brand new description."
    embed = CountingEmbed(DIM)
    select(tools, embed, tmp_path)
    assert embed.texts[1] == [tools[10].selection_text()]
    third = CountingEmbed(DIM)
    select(tools, third, tmp_path)
    assert third.calls == 1


def test_cache_is_per_embedding_model(tmp_path: Path) -> None:
    tools = generated_tools(50)
    select(tools, CountingEmbed(DIM), tmp_path)
    other = CountingEmbed(DIM)
    select_tools(tools, QUERY, embed=other, embed_model="other:latest", cache_dir=tmp_path)
    assert other.calls == 2
    assert cache_file(tmp_path, "m") != cache_file(tmp_path, "other:latest")


def test_stored_vectors_are_unit_length(tmp_path: Path) -> None:
    def unnormalised(texts: list[str]) -> list[list[float]]:
        return [[3.0 * (i + 1), 4.0 * (i + 1)] for i in range(len(texts))]

    select(generated_tools(30), unnormalised, tmp_path)
    cache = ToolVectorCache(cache_file(tmp_path, "m"), "m")
    cache.load()
    assert cache.vectors.shape == (26, 2)
    assert np.allclose(np.linalg.norm(cache.vectors, axis=1), 1.0)


def test_within_the_limit_everything_is_sent_without_embedding(tmp_path: Path) -> None:
    tools = generated_tools(12)
    embed = CountingEmbed(DIM)
    chosen = select(tools, embed, tmp_path, limit=12)
    assert chosen == Selection(tools, [t.name for t in tools], "all", None,
                               "12 tools, within the limit of 12", tools, None)
    assert chosen.report() == {"method": "all", "reason": "12 tools, within the limit of 12",
                               "groups": None, "offered": [t.name for t in tools]}
    assert embed.calls == 0
    assert not any(tmp_path.iterdir())


def test_limit_and_top_k_are_respected(tmp_path: Path) -> None:
    tools = generated_tools(40, core=2)
    chosen = select(tools, CountingEmbed(DIM), tmp_path, limit=20, top_k=3)
    assert len(chosen.tools) == 2 + 3


def test_no_embedding_model_falls_back_to_all_tools(tmp_path: Path) -> None:
    tools = generated_tools(30)
    chosen = select(tools, None, tmp_path)
    assert chosen.method == "all" and chosen.tools == tools
    assert chosen.reason == "no embedder: no embedding model available"
    assert chosen.warning is not None and "no embedding model" in chosen.warning
    assert "offering all 30 enabled tools" in chosen.warning


def test_embed_raising_falls_back_with_a_warning(tmp_path: Path) -> None:
    def unreachable(texts: list[str]) -> list[list[float]]:
        raise ConnectionError("Failed to connect to Ollama")

    tools = generated_tools(30)
    chosen = select(tools, unreachable, tmp_path)
    assert chosen.method == "all" and len(chosen.tools) == 30
    assert chosen.reason == "search error: ConnectionError: Failed to connect to Ollama"
    assert "ConnectionError: Failed to connect to Ollama" in (chosen.warning or "")


def test_wrong_number_of_vectors_falls_back(tmp_path: Path) -> None:
    def short(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0]] * max(1, len(texts) - 1)

    chosen = select(generated_tools(30), short, tmp_path)
    assert chosen.method == "all"
    assert (chosen.reason or "").startswith("index build failed: ValueError")
    assert not cache_file(tmp_path, "m").exists()


@pytest.mark.parametrize(
    "content",
    [
        b'LOCALGPT-TOOL-VECTORS 1\n{"model": "m", "dim": 3, "hashes": ["a"]}\nxx',
        b'LOCALGPT-TOOL-VECTORS 1\n{"model": "m", "dim": 3, "hashes": ["a", "b"]}\n' + bytes(12),
        b"LOCALGPT-TOOL-VECTORS 1\nnot json\n",
        b"PK\x03\x04 something else entirely",
        b"",
    ],
)
def test_corrupt_cache_is_rebuilt(tmp_path: Path, content: bytes) -> None:
    tools = generated_tools(30)
    cache_file(tmp_path, "m").write_bytes(content)
    embed = CountingEmbed(DIM)
    chosen = select(tools, embed, tmp_path)
    assert chosen.method == "semantic" and "convert_currency" in chosen.offered_names
    assert chosen.warning is not None and "was corrupt" in chosen.warning
    assert embed.calls == 2
    warm = CountingEmbed(DIM)
    assert select(tools, warm, tmp_path).warning is None and warm.calls == 1


def test_unreadable_cache_falls_back(tmp_path: Path) -> None:
    cache_file(tmp_path, "m").mkdir(parents=True)  # a directory where the file should be
    chosen = select(generated_tools(30), CountingEmbed(DIM), tmp_path)
    assert chosen.method == "all"
    assert (chosen.reason or "").startswith("index build failed: tool vector cache unreadable")
    assert "tool vector cache unreadable" in (chosen.warning or "")


def test_a_new_embedding_dimension_replaces_the_cache(tmp_path: Path) -> None:
    tools = generated_tools(30)
    select(tools, CountingEmbed(DIM), tmp_path)
    bigger = CountingEmbed(DIM * 2)
    chosen = select(tools, bigger, tmp_path)
    assert chosen.method == "semantic" and bigger.calls == 2
    assert "held 256-dimensional vectors, not 512" in (chosen.warning or "")
    cache = ToolVectorCache(cache_file(tmp_path, "m"), "m")
    cache.load()
    assert cache.vectors.shape == (26, DIM * 2)


def test_unwritable_cache_still_selects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", disk_full)
    chosen = select(generated_tools(30), CountingEmbed(DIM), tmp_path)
    assert chosen.method == "semantic" and "convert_currency" in chosen.offered_names
    assert "could not save the tool vector cache" in (chosen.warning or "")
    assert "No space left on device" in (chosen.warning or "")


def test_cache_write_leaves_no_temp_files(tmp_path: Path) -> None:
    select(generated_tools(30), CountingEmbed(DIM), tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [cache_file(tmp_path, "m").name]


# -- groups: the context filter ahead of semantic selection ---------------------------


def grouped_tools(n: int) -> list:
    """`generated_tools(n)` spread over groups: core_0/core_1 and the currency converter in
    `money`, core_2/core_3 in `ops`, the look-alikes alternately `money` and `ops`."""
    import dataclasses

    tools = generated_tools(n)
    out = []
    for i, tool in enumerate(tools):
        money = tool.name in ("core_0", "core_1", "convert_currency") or (i > 4 and i % 2 == 0)
        out.append(dataclasses.replace(tool, group="money" if money else "ops"))
    return out


def test_groups_filter_before_semantic_selection_and_keep_their_core(tmp_path: Path) -> None:
    tools = grouped_tools(200)
    embed = CountingEmbed(DIM)
    chosen = select(tools, embed, tmp_path, groups=["money"])
    assert chosen.method == "semantic" and chosen.reason is None
    assert chosen.offered_names[:3] == ["core_0", "core_1", "convert_currency"]
    assert len(chosen.tools) == 2 + 6
    assert {t.group for t in chosen.tools} == {"money"}
    assert {t.group for t in chosen.allowed} == {"money"}
    # only the allowed groups' tool texts were embedded (the query, then the index)
    assert len(embed.texts[1]) == len([t for t in tools if t.group == "money" and not t.core])
    assert chosen.report()["groups"] == ["money"]


def test_groups_within_the_limit_are_context_filtered(tmp_path: Path) -> None:
    tools = grouped_tools(200)
    embed = CountingEmbed(DIM)
    chosen = select(tools, embed, tmp_path, groups=["ops"], limit=500)
    assert chosen.method == "context_filtered"
    assert chosen.reason == f"{len(chosen.tools)} tools, within the limit of 500"
    assert chosen.tools == [t for t in tools if t.group == "ops"] and embed.calls == 0


@pytest.mark.parametrize(
    ("embed_kind", "reason"),
    [("none", "no embedder: no embedding model available"),
     ("query_fails", "search error: ConnectionError: down"),
     ("index_fails", "index build failed: ConnectionError: down")],
)
def test_every_degradation_branch_keeps_the_group_filter(
    tmp_path: Path, embed_kind: str, reason: str
) -> None:
    def query_fails(texts: list[str]) -> list[list[float]]:
        raise ConnectionError("down")

    working = CountingEmbed(DIM)

    def index_fails(texts: list[str]) -> list[list[float]]:
        if len(texts) > 1:
            raise ConnectionError("down")
        return working(texts)

    embed = {"none": None, "query_fails": query_fails, "index_fails": index_fails}[embed_kind]
    tools = grouped_tools(60)
    chosen = select(tools, embed, tmp_path, groups=["money"])
    assert chosen.method == "context_filtered" and chosen.reason == reason
    assert chosen.tools == [t for t in tools if t.group == "money"]
    assert "offering all" in (chosen.warning or "") and "allowed tools" in (chosen.warning or "")


def test_a_group_of_only_core_tools_needs_no_embedding(tmp_path: Path) -> None:
    import dataclasses

    tools = [dataclasses.replace(t, core=True) for t in grouped_tools(40)]
    chosen = select(tools, CountingEmbed(DIM), tmp_path, groups=["ops"], limit=5)
    assert chosen.method == "context_filtered" and chosen.reason == "only core tools"


def test_an_unknown_group_offers_nothing(tmp_path: Path) -> None:
    chosen = select(grouped_tools(30), CountingEmbed(DIM), tmp_path, groups=["nope"])
    assert chosen.tools == [] and chosen.method == "context_filtered"
