"""Sortable unique ids (ULID layout): 26 Crockford base32 characters, time first.

Conversations and messages are named by these ids so that sorting by id sorts by
creation time, a prefix typed by a person (`history show 01JDX4`) can be resolved
with a range scan on the primary key, and ids made on different machines never
collide. Within one process, ids made in the same millisecond are still strictly
increasing (the random part is incremented), so insertion order survives a sort.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any, Protocol

from localgpt_cli.errors import AmbiguousId

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ID_LENGTH = 26
_RANDOM_BITS = 80
_RANDOM_LIMIT = 1 << _RANDOM_BITS
# Crockford's rules for reading what a person typed: case-insensitive, and the letters
# that look like digits read as those digits.
_READ_AS = str.maketrans({"I": "1", "L": "1", "O": "0"})
_VALID = frozenset(ALPHABET)
# Ids shown to people are cut to the shortest unique prefix, but never shorter than this
# (8 Crockford characters cover the first 38 bits of the creation time, about a second).
SHORT_ID_MIN = 8


class _Generator:
    """The last (millisecond, random) pair handed out, behind a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last_ms = -1
        self.last_random = 0

    def reset(self) -> None:
        # A forked child must not continue its parent's sequence: two children of one
        # parent would otherwise both hand out last_random + 1 in the same millisecond.
        self.lock = threading.Lock()
        self.last_ms = -1
        self.last_random = 0

    def next(self) -> tuple[int, int]:
        with self.lock:
            ms = time.time_ns() // 1_000_000
            if ms <= self.last_ms:
                # Same millisecond, or the clock stepped back: stay on the last
                # millisecond and count up so ids keep increasing.
                ms = self.last_ms
                rand = self.last_random + 1
                if rand >= _RANDOM_LIMIT:
                    ms += 1
                    rand = int.from_bytes(os.urandom(10), "big")
            else:
                rand = int.from_bytes(os.urandom(10), "big")
            self.last_ms, self.last_random = ms, rand
            return ms, rand


_generator = _Generator()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_generator.reset)


def encode(value: int) -> str:
    """The 26-character Crockford base32 spelling of a 128-bit integer."""
    chars = []
    for _ in range(ID_LENGTH):
        chars.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_id() -> str:
    """A new id: 48 bits of Unix milliseconds, then 80 bits that are random per ms."""
    ms, rand = _generator.next()
    return encode((ms << _RANDOM_BITS) | rand)


def normalize_prefix(text: str) -> str | None:
    """What a person typed as (part of) an id, in canonical spelling; None if it cannot be one.

    Lower case is accepted and I, L, O read as 1, 1, 0, as Crockford base32 intends.
    """
    canonical = text.strip().upper().translate(_READ_AS)
    if not canonical or len(canonical) > ID_LENGTH or not set(canonical) <= _VALID:
        return None
    return canonical


class _Resolver(Protocol):
    """What the short-id rule needs of a store: naming the one id a prefix stands for."""

    def resolve(self, reference: str) -> Any: ...


def short_ids(store: _Resolver, ids: Sequence[str]) -> dict[str, str]:
    """Each id cut to its shortest prefix (>= SHORT_ID_MIN) that names it alone, like git.

    Unique among all stored ids, not just the shown ones, so a shortened id can be
    pasted back into `history show`. One indexed range lookup per id in the common case.
    """
    out: dict[str, str] = {}
    for cid in ids:
        length = SHORT_ID_MIN
        while length < ID_LENGTH:
            try:
                store.resolve(cid[:length])
                break
            except AmbiguousId as exc:
                # Skip past the characters shared with the candidates it listed.
                shared = max((len(os.path.commonprefix([cid, other]))
                              for other in exc.candidates if other != cid), default=length)
                length = max(length, shared) + 1
        out[cid] = cid[:length]
    return out
