"""The unified-diff checker and the atomic writer behind propose_edit and `apply`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localgpt_cli.tools.base import ToolError
from localgpt_cli.tools.edit import plan_edit
from localgpt_cli.tools.files import Sandbox
from localgpt_cli.tools.patch import apply_hunks, parse_diff, sha256, unified, write_atomic
from localgpt_cli.tools.preview import propose_command, propose_edit

TEXT = "".join(f"line {i}\n" for i in range(1, 21))


def test_hunks_apply_at_their_line_or_the_nearest_match() -> None:
    diff = "@@ -3,2 +3,2 @@\n line 3\n-line 4\n+LINE FOUR\n@@ -15,1 +15,2 @@\n line 15\n+new\n"
    after = apply_hunks(TEXT, parse_diff(diff))
    assert "line 3\nLINE FOUR\nline 5" in after and "line 15\nnew\nline 16" in after
    shifted = "@@ -1,2 +1,2 @@\n line 10\n-line 11\n+eleven\n"  # a wrong line number
    assert "line 10\neleven\nline 12" in apply_hunks(TEXT, parse_diff(shifted))


def test_line_endings_and_a_missing_final_newline_are_kept() -> None:
    crlf = "a\r\nb\r\nc\r\n"
    assert apply_hunks(crlf, parse_diff("@@ -2 +2 @@\n-b\n+B\n")) == "a\r\nB\r\nc\r\n"
    bare = "a\nb"
    diff = "@@ -2 +2 @@\n-b\n\\ No newline at end of file\n+B\n\\ No newline at end of file\n"
    assert apply_hunks(bare, parse_diff(diff)) == "a\nB"


def test_a_blank_context_line_without_its_space_still_counts() -> None:
    text = "x\n\ny\n"
    assert apply_hunks(text, parse_diff("@@ -1,3 +1,3 @@\n x\n\n-y\n+z\n")) == "x\n\nz\n"


@pytest.mark.parametrize(
    ("diff", "error"),
    [("", "malformed diff: no '@@ -a,b"),
     ("@@ -1 +1 @@\n*line 1\n", "starts with neither"),
     ("@@ -1,3 +1,1 @@\n-line 1\n+x\n", "announces 3 old and 1 new lines but has 1 and 1"),
     ("@@ -1 +1 @@\n-line\x00 1\n+x\n", "NUL byte"),
     ("@@ -4 +4 @@\n-line 99\n+x\n", "does not match the file")],
)
def test_malformed_or_mismatched_diffs_say_why(diff: str, error: str) -> None:
    with pytest.raises(ToolError, match=error):
        apply_hunks(TEXT, parse_diff(diff))


def test_the_shown_diff_is_regenerated_from_the_file() -> None:
    assert unified("f.txt", "a\nb\n", "a\nB\n") == (
        "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n")


def test_write_atomic_keeps_mode_and_backup(tmp_path: Path) -> None:
    target = tmp_path / "run.sh"
    target.write_text("old\n")
    target.chmod(0o750)
    backup = tmp_path / "run.sh.bak"
    write_atomic(target, b"new\n", backup)
    assert target.read_text() == "new\n" and backup.read_text() == "old\n"
    assert target.stat().st_mode & 0o777 == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh", "run.sh.bak"]


def test_a_failed_rename_leaves_the_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.txt"
    target.write_text("old\n")

    def disk_error(*args: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", disk_error)
    with pytest.raises(OSError):
        write_atomic(target, b"new\n", tmp_path / "f.bak")
    assert target.read_text() == "old\n"
    assert not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def test_propose_then_apply_and_the_refusals(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("a\nb\n")
    sandbox = Sandbox([tmp_path], tmp_path)
    preview = propose_edit(sandbox, "f.txt", "@@ -2 +2 @@\n-b\n+B\n").payload() | {"id": "abcd1234"}
    assert preview["sha256"] == sha256(b"a\nb\n")
    other = Sandbox([tmp_path / "sub"], tmp_path / "sub")
    with pytest.raises(ToolError, match="outside the allowed folders"):
        plan_edit(preview, [other])
    real, backup = plan_edit(preview, [sandbox]).write()
    assert real.read_text() == "a\nB\n" and backup.name == "f.txt.abcd1234.bak"
    with pytest.raises(ToolError, match="already changed by this edit"):
        plan_edit(preview, [sandbox])
    with pytest.raises(ToolError, match="never runs a proposed command"):
        plan_edit(propose_command("ls").payload(), [sandbox])


def test_binary_and_non_utf8_files_are_not_edited(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"\x00\x01")
    (tmp_path / "l.txt").write_bytes(b"caf\xe9\n")
    sandbox = Sandbox([tmp_path], tmp_path)
    with pytest.raises(ToolError, match="looks like a binary file"):
        propose_edit(sandbox, "b.bin", "@@ -1 +1 @@\n-a\n+b\n")
    with pytest.raises(ToolError, match="is not UTF-8 text"):
        propose_edit(sandbox, "l.txt", "@@ -1 +1 @@\n-a\n+b\n")
