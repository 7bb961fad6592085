"""Shared pytest fixtures. Add yours below the existing sections, each with a header."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.requires import unavailable
from tests.standin import StandIn

# --- Environment isolation and the Ollama stand-in (tests/standin.py) -----------------------

# Settings a developer's shell may carry that would leak into a test run.
_LEAKY_ENV = (
    "OLLAMA_API_KEY",
    "LOCALGPT_MODEL",
    "LOCALGPT_EMBED_MODEL",
    "LOCALGPT_DB",
    "LOCALGPT_COLLECTION",
    "LOCALGPT_CONFIG",
    "LOCALGPT_HISTORY_URL",
    "LOCALGPT_HISTORY_BACKEND",
    # pytest-xdist's workers export COLUMNS=80 and LINES=24, which rich and prompt_toolkit
    # obey over the size of the terminal a test opens (tmux's 100 columns).
    "COLUMNS",
    "LINES",
)


def _closed_port() -> int:
    """A loopback port nobody listens on (bound, then released), so a test without a
    server gets 'connection refused' instead of reaching a real Ollama on 11434."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point every path the CLI writes to under tmp_path; returns the folder holding them."""
    root = tmp_path / "env"
    for var, sub in (
        ("LOCALGPT_HOME", "localgpt"),
        ("XDG_CONFIG_HOME", "config"),
        ("XDG_CACHE_HOME", "cache"),
        ("XDG_DATA_HOME", "data"),
    ):
        folder = root / sub
        folder.mkdir(parents=True)
        monkeypatch.setenv(var, str(folder))
    for var in _LEAKY_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{_closed_port()}")
    return root


@pytest.fixture
def standin(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    """A running Ollama stand-in with OLLAMA_HOST pointing at it, in an isolated env.

    Teardown fails the test if the stand-in itself crashed, so a stand-in bug never
    passes for a CLI bug (or hides one).
    """
    server = StandIn().start()
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    try:
        yield server
    finally:
        server.stop()
    assert not server.errors, "the Ollama stand-in crashed:\n" + "\n".join(server.errors)


# --- PostgreSQL for the history tests (tests/pg.py) ------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """One real PostgreSQL server for the whole run, started on first use.

    Skipped (with the reason) when the server's programs are not installed, except
    under CI, where .ci/run installs them and their absence is a failure.
    """
    from tests import pg

    bin_dir = pg.binaries()
    if bin_dir is None:
        unavailable("PostgreSQL is not installed (apt-get install postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (the postgres extra)")
    server = pg.Server(bin_dir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: object) -> str:
    """The URL of a new, empty database on the test server (one per test)."""
    from localgpt_cli.ids import new_id
    from tests.pg import Server

    assert isinstance(pg_server, Server)
    name = "t_" + new_id().lower()
    pg_server.admin(f"CREATE DATABASE {name}")
    return pg_server.url(name)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A history test of the SQLite file itself (`sqlite_only`) has no PostgreSQL variant:
    that variant is deselected at collection rather than collected and skipped."""
    keep, drop = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        on_postgres = params is not None and params.params.get("backend") == "postgres"
        (drop if on_postgres and item.get_closest_marker("sqlite_only") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
