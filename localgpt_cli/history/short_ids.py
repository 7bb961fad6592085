"""The short-id rule: conversations are shown by the shortest prefix that names them alone.

Like git's abbreviated hashes, a shown id can be pasted back (`history show 01JDX4QZ`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from localgpt_cli.errors import AmbiguousId
from localgpt_cli.ids import ID_LENGTH

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store

# Ids shown to people are cut to the shortest unique prefix, but never shorter than this
# (8 Crockford characters cover the first 38 bits of the creation time, about a second).
SHORT_ID_MIN = 8


def short_ids(store: Store, ids: Sequence[str]) -> dict[str, str]:
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
