"""The embedding cache's set of text hashes (rag/hashkeys.py): what it holds is what was
added, across the merges into its sorted array, in any order of asking."""

from __future__ import annotations

import hashlib

from localgpt_cli.rag.hashkeys import MERGE, KnownHashes


def _hashes(start: int, stop: int) -> list[str]:
    return [hashlib.sha256(str(i).encode()).hexdigest() for i in range(start, stop)]


def test_held_hashes_are_found_across_merges_and_others_are_not() -> None:
    held = _hashes(0, MERGE * 2 + 5)  # two merges into the array, five in the recent set
    known = KnownHashes(held[:10])
    known.update(held[10:])
    others = _hashes(10**6, 10**6 + 1000)
    assert all(h in known for h in held[::97])
    assert not any(h in known for h in others)
    asked = others[:3] + held[:2] + held[-2:] + held[:1]  # a repeat is answered once
    assert known.among(asked) == held[:2] + held[-2:]
    assert bool(known) and not KnownHashes()
    assert KnownHashes().among(held[:3]) == []


def test_a_hash_that_is_not_hex_is_held_too() -> None:
    known = KnownHashes(["not-a-hex-digest", "ffff"])
    assert "not-a-hex-digest" in known and "ffff" in known and "fffe" not in known
    assert known.among(["x", "not-a-hex-digest"]) == ["not-a-hex-digest"]
