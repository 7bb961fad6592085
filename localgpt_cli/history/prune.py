"""Pruning by age: reading an age like 30d, spelling it back, and the cutoff it sets.

`history prune --older-than AGE` deletes conversations not updated for AGE. The rules
here are the ones a person meets: the units an age may use, the words it is echoed
back in, and which conversations count as older (the store applies the same cutoff
when it deletes).
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from localgpt_cli.history.protocol import Store

_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(value: str) -> timedelta:
    """An age like 90m, 12h, 30d or 2w (a positive whole number and a unit).

    Raises ValueError with the message to show when the text is not such an age, is
    zero, or reaches back before the calendar starts.
    """
    match = re.fullmatch(r"\s*(\d+)\s*([mhdw])\s*", value, flags=re.IGNORECASE)
    if match is None:
        raise ValueError(f"{value!r} is not a duration: use a number and m, h, d or w "
                         "(90m, 12h, 30d, 2w).")
    amount = int(match.group(1))
    if amount == 0:
        raise ValueError(f"{value!r} is zero: give an age greater than zero.")
    try:
        age = timedelta(**{_UNITS[match.group(2).lower()]: amount})
        datetime.now(timezone.utc) - age
    except OverflowError:
        raise ValueError(f"{value!r} is longer than the calendar goes back.") from None
    return age


def spell_age(age: timedelta) -> str:
    """An age in the largest unit that divides it exactly: 2 weeks, 36 hours."""
    seconds = int(age.total_seconds())
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{seconds} seconds"


def cutoff(age: timedelta) -> str:
    """The stored-time stamp before which a conversation is older than `age`, from now."""
    from localgpt_cli.history.rows import iso

    return iso(datetime.now(timezone.utc) - age)


def count_older(store: Store, before: str) -> int:
    """How many conversations were last updated before the stamp `before`.

    Counted only to ask first; the store applies its own cutoff when it deletes.
    """
    return sum(1 for c in store.list_conversations(limit=sys.maxsize) if c.updated_at < before)
