"""chat's request path (cli/turn.py) and what `App` opens for a command."""

from __future__ import annotations

import dataclasses

from localgpt_cli.cli.app import DOCUMENT_EMBED_TIMEOUT, App
from localgpt_cli.cli.chat import chat
from localgpt_cli.cli.chat_flags import ChatFlags


def test_chat_flags_are_exactly_the_commands_parameters():
    # click hands every exposed option to ChatFlags by name: a flag added to the command
    # without a field (or a field without a flag) would fail every chat.
    exposed = {p.name for p in chat.params if p.expose_value}
    assert exposed == {f.name for f in dataclasses.fields(ChatFlags)}


def test_queries_embed_with_the_commands_client(isolated_env):
    app = App()
    assert app.embedder().remote("nomic-embed-text") == (app.client, "nomic-embed-text")
    assert app.client.timeout is None  # no --timeout: no limit, as every other call


def test_documents_wait_120_s_for_an_embedding_unless_timeout_says_otherwise(isolated_env):
    app = App()
    documents, _name = app.embedder(documents=True).remote("m")
    assert documents is not app.client and documents.timeout == DOCUMENT_EMBED_TIMEOUT
    assert app.embedder(documents=True).remote("m")[0] is documents  # opened once
    timed = App()
    timed.set_flag("timeout", 5.0)
    assert timed.embedder(documents=True).remote("m")[0] is timed.client
    assert timed.client.timeout == 5.0


def test_history_read_only_creates_nothing(isolated_env):
    import click

    app = App()
    with click.Context(chat):
        assert app.history(readonly=True) is None
        assert not (app.settings.home_dir / "history.db").exists()
        store = app.history()
        assert store is not None and (app.settings.home_dir / "history.db").exists()
