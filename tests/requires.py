"""What a test does when a real component it needs (PostgreSQL, the MiniLM weights, the
llama.cpp build, a shell) is missing: a skip on a developer's machine, where installing
it is optional, and a failure under CI, where `.ci/run` installs every one of them, so a
broken install can never pass as a green run of skipped tests."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (.ci/run installs it under CI)")
    pytest.skip(reason)
