"""Issue 29 in the tools themselves: the deny list on resolved paths, list_directory
leaving credentials out, `tools.files.deny`/`allow`, and redaction of what is read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localgpt_cli.redact import redact, redact_part
from localgpt_cli.tools.base import Tool, ToolError
from localgpt_cli.tools.denylist import DenyList
from localgpt_cli.tools.files import file_tools
from localgpt_cli.tools.preview import preview_tools
from tests.fakehome import AWS_ID, AWS_SECRET, CREDENTIALS, KEY_BODY, ORDINARY, RSA, make_home


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A home holding a fake credential of each kind, and one ordinary file."""
    return make_home(tmp_path / "home")


def tools(home: Path, **deny: object) -> dict[str, Tool]:
    rules = DenyList(home=home, **deny)  # type: ignore[arg-type]
    found = [*file_tools([home], base=home, deny=rules), *preview_tools([home], home, rules)]
    return {t.name: t for t in found}


@pytest.mark.parametrize("name", sorted(CREDENTIALS))
def test_every_credential_is_refused_naming_the_rule_not_the_content(
    home: Path, name: str
) -> None:
    with pytest.raises(ToolError) as info:
        tools(home)["read_file"].run({"path": name})
    message = str(info.value)
    assert "withheld by the secrets rule" in message
    assert CREDENTIALS[name].strip().splitlines()[-1] not in message
    assert "tools.files.allow" in message


def test_dot_dot_and_a_symlink_resolve_before_the_rules(home: Path) -> None:
    (home / "project/innocent.txt").symlink_to(home / ".ssh/id_rsa")
    (home / "project/keys").symlink_to(home / ".aws")
    read = tools(home)["read_file"]
    for path in ("project/../.ssh/id_rsa", "project/innocent.txt", "project/keys/credentials",
                 str(home / "project/../.netrc")):
        with pytest.raises(ToolError, match="withheld by the secrets rule"):
            read.run({"path": path})


def test_an_ordinary_file_beside_them_is_read(home: Path) -> None:
    read = tools(home)["read_file"]
    assert read.run({"path": ORDINARY}) == "# Notes\nthe build server is ci-7\n"
    assert read.run({"path": "project/id_ed25519.pub"}) == "ssh-ed25519 AAAA public\n"


def test_list_directory_leaves_them_out(home: Path) -> None:
    listing = tools(home)["list_directory"].run({"path": "project", "show_hidden": True})
    assert "notes.md" in listing and "id_ed25519.pub" in listing
    for withheld in (".env", ".env.production", "server.pem", "tls.key", "client.p12",
                     "backup.txt", "id_ed25519 "):
        assert f"  {withheld}" not in listing + " ", withheld
    (home / "project/harmless").symlink_to(home / ".netrc")
    (home / "project/keys").symlink_to(home / ".aws")
    (home / "project/docs").symlink_to(home / "project")
    linked = tools(home)["list_directory"].run({"path": "project"})
    assert "harmless" not in linked and "keys" not in linked and "link  docs" in linked
    top = tools(home)["list_directory"].run({"path": ".", "show_hidden": True})
    assert ".ssh" not in top and ".netrc" not in top and "project/" in top


def test_propose_edit_does_not_read_a_key(home: Path) -> None:
    diff = "--- a/.env\n+++ b/.env\n@@ -1 +1 @@\n-x\n+y\n"
    with pytest.raises(ToolError, match="withheld by the secrets rule"):
        tools(home)["propose_edit"].call({"path": "project/.env", "diff": diff})
    with pytest.raises(ToolError, match="private-key header"):
        tools(home)["propose_edit"].call({"path": "project/backup.txt", "diff": diff})


def test_config_deny_adds_and_allow_names_a_path(home: Path) -> None:
    extra = tools(home, deny=["*.md"])["read_file"]
    with pytest.raises(ToolError, match=r"tools.files.deny '\*.md'"):
        extra.run({"path": ORDINARY})
    allowed = tools(home, allow=[str(home / "project/.env")])["read_file"]
    assert "AWS_SECRET_ACCESS_KEY=[redacted: aws_secret_access_key]" in allowed.run(
        {"path": "project/.env"})  # allowed by name, and still redacted
    with pytest.raises(ToolError):  # only the path named
        allowed.run({"path": "project/.env.production"})


def test_localgpt_config_and_history_are_refused(home: Path) -> None:
    own = [home / "project/config.toml", home / "project/history.db"]
    for path in own:
        path.write_text("x")
    (home / "project/history.db-wal").write_text("x")
    read = tools(home, own=own)["read_file"]
    for name in ("config.toml", "history.db", "history.db-wal"):
        with pytest.raises(ToolError, match="localgpt's own"):
            read.run({"path": f"project/{name}"})


def test_what_a_read_file_holds_that_looks_like_a_secret_is_redacted(tmp_path: Path) -> None:
    (tmp_path / "deploy.sh").write_text(
        f"export AWS_ACCESS_KEY_ID={AWS_ID}\nexport AWS_SECRET_ACCESS_KEY={AWS_SECRET}\n"
        'curl -H "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig"\n'
        'password = "correct horse battery"\n' + RSA + "done\n")
    warnings: list[tuple[str, str]] = []
    read = {t.name: t for t in file_tools([tmp_path], tmp_path,
                                            warn=lambda *w: warnings.append(w))}["read_file"]
    text = read.run({"path": "deploy.sh"})
    for secret in (AWS_ID, AWS_SECRET, "eyJhbGciOiJIUzI1NiJ9", "correct horse", KEY_BODY):
        assert secret not in text
    assert "[redacted: aws_secret_access_key]" in text and text.endswith("done\n")
    (code, message), = warnings
    assert code == "secret_redacted" and message.startswith("deploy.sh: redacted ")
    assert "aws_access_key_id (line 1)" in message and "private_key (line 5)" in message
    assert AWS_SECRET not in message


@pytest.mark.parametrize("filler", ["plain ASCII line", "non-ASCII line, café"])
def test_a_later_page_is_redacted_and_names_the_files_line(tmp_path: Path, filler: str) -> None:
    """An ASCII file is decoded only around the page it reads: the secret on page 3 is
    still redacted, the line named is the file's (not the window's), and the page's text
    is what a full decode gives."""
    lines = [f"{filler} {n}" for n in range(1, 3001)]
    lines[2499] = f"export AWS_ACCESS_KEY_ID={AWS_ID}"
    (tmp_path / "big.log").write_text("\n".join(lines) + "\n")
    warnings: list[tuple[str, str]] = []
    read = {t.name: t for t in file_tools([tmp_path], tmp_path,
                                            warn=lambda *w: warnings.append(w))}["read_file"]
    whole = (tmp_path / "big.log").read_text()
    at = whole.index(AWS_ID)
    page = at // 20_000 + 1
    text = read.run({"path": "big.log", "page": page})
    assert AWS_ID not in text and "[redacted: aws_access_key_id]" in text
    expected = whole[(page - 1) * 20_000 : page * 20_000].replace(
        AWS_ID, "[redacted: aws_access_key_id]")
    assert text.startswith(expected + "\n[… truncated: showed characters ")
    (_code, message), = warnings
    assert "aws_access_key_id (line 2500)" in message


def test_a_page_cut_through_a_secret_shows_none_of_it(tmp_path: Path) -> None:
    text = "x" * 150 + "\n" + RSA + "y" * 200
    start = 150 + 1 + 60  # a page starting inside the key's body
    part, found = redact_part(text, start, start + 120, margin=8192)
    assert KEY_BODY[20:] not in part and found[0].kind == "private_key"
    assert redact_part(text, 0, 100)[0] == "x" * 100


def test_words_and_code_are_not_secrets() -> None:
    text = ("the password is strong; a token of thanks\n"
            "def login(password: str, token: Optional[str]) -> None:\n"
            "api_key = os.environ.get('API_KEY')\n")
    assert redact(text) == (text, [])


def test_the_listing_is_not_slowed_by_a_missing_file(home: Path) -> None:
    os.symlink(home / "gone", home / "project/dangling")
    assert "dangling" in tools(home)["list_directory"].run({"path": "project"})


def test_a_name_in_capitals_is_refused_as_in_small_letters(home: Path) -> None:
    """Before: the name rules were case-sensitive, so `ID_RSA`, `Server.PEM` and `.ENV`
    were read and listed (and on a case-insensitive disk, as macOS's is by default,
    `~/.SSH/id_rsa` is the key itself)."""
    for name, text in (("ID_RSA", "upper-id-rsa-55\n"), ("Server.PEM", "upper-pem-33\n"),
                       (".ENV", "upper-env-99\n"), ("Deploy.Key", "upper-key-17\n")):
        (home / "project" / name).write_text(text)
    (home / ".SSH").mkdir()
    (home / ".SSH/notes").write_text("upper-ssh-41\n")
    found = tools(home)
    for path in ("project/ID_RSA", "project/Server.PEM", "project/.ENV", "project/Deploy.Key",
                 ".SSH/notes"):
        with pytest.raises(ToolError, match="withheld by the secrets rule"):
            found["read_file"].run({"path": path})
    listing = found["list_directory"].run({"path": "project", "show_hidden": True})
    assert "notes.md" in listing
    for name in ("ID_RSA", "Server.PEM", ".ENV", "Deploy.Key"):
        assert name not in listing


def test_a_hard_link_to_a_credential_is_refused_by_what_it_is(home: Path) -> None:
    """Before: a hard link in the project to ~/.pgpass (or ~/.aws/credentials) has its own
    name and path, so `realpath` did not lead to the rule and the password was read."""
    os.link(home / ".pgpass", home / "project/db.txt")
    os.link(home / ".aws/credentials", home / "project/aws.txt")
    found = tools(home)
    for path in ("project/db.txt", "project/aws.txt"):
        with pytest.raises(ToolError, match="withheld by the secrets rule") as info:
            found["read_file"].run({"path": path})
        assert "pgpass-pass-12" not in str(info.value)
    listing = found["list_directory"].run({"path": "project", "show_hidden": True})
    assert "db.txt" not in listing and "aws.txt" not in listing and "notes.md" in listing
