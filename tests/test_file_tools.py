"""read_file and list_directory: what they return inside the sandbox, what they refuse."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from localgpt_cli.tools import files
from localgpt_cli.tools.base import Tool, ToolError
from localgpt_cli.tools.files import Sandbox, file_tools
from tests.pdfgen import make_pdf


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\nbuy milk\n", encoding="utf-8")
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.txt").write_text("deep text", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("secret outside", encoding="utf-8")
    return folder


def tools_for(root: Path, *extra: Path) -> dict[str, Tool]:
    return {t.name: t for t in file_tools([root, *extra], base=root)}


def read(root: Path, **args: object) -> str:
    return tools_for(root)["read_file"].run(args)


def refused(root: Path, path: str) -> str:
    with pytest.raises(ToolError) as info:
        read(root, path=path)
    return str(info.value)


def test_reads_a_file_inside_the_root(root: Path) -> None:
    assert read(root, path="notes.md") == "# Notes\nbuy milk\n"
    assert read(root, path="sub/deep.txt") == "deep text"
    assert read(root, path=str(root / "sub" / "deep.txt")) == "deep text"
    assert read(root, path="sub/../notes.md").startswith("# Notes")


def test_a_second_root_is_allowed(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "collection"
    other.mkdir()
    (other / "doc.txt").write_text("from the collection", encoding="utf-8")
    tool = tools_for(root, other)["read_file"]
    assert tool.run({"path": str(other / "doc.txt")}) == "from the collection"
    assert str(other) in tool.description


def test_refuses_etc_passwd_naming_path_and_roots(root: Path) -> None:
    message = refused(root, "/etc/passwd")
    assert "refused: /etc/passwd is outside the allowed folders" in message
    assert str(root) in message


def test_refuses_dotdot_escape(root: Path) -> None:
    message = refused(root, "../outside.txt")
    assert "../outside.txt is outside the allowed folders" in message
    assert "refused" in refused(root, "../../x")


def test_refuses_symlink_inside_root_pointing_outside(root: Path, tmp_path: Path) -> None:
    (root / "link.txt").symlink_to(tmp_path / "outside.txt")
    (root / "linkdir").symlink_to(tmp_path)
    assert "link.txt is outside the allowed folders" in refused(root, "link.txt")
    assert "outside the allowed folders" in refused(root, "linkdir/outside.txt")


def test_symlink_within_root_is_followed(root: Path) -> None:
    (root / "alias.md").symlink_to(root / "notes.md")
    assert read(root, path="alias.md").startswith("# Notes")


def test_refuses_proc_even_when_root_is_slash(tmp_path: Path) -> None:
    tool = {t.name: t for t in file_tools(["/"], base=tmp_path)}["read_file"]
    for path in ("/proc/self/environ", "/dev/zero", "/sys/kernel/hostname"):
        with pytest.raises(ToolError, match="system folder"):
            tool.run({"path": path})


def test_refuses_a_binary(root: Path) -> None:
    (root / "blob.bin").write_bytes(b"\x7fELF\x00\x01\x02" * 100)
    message = refused(root, "blob.bin")
    assert "binary" in message and "blob.bin" in message


def test_refuses_a_directory_and_points_to_list_directory(root: Path) -> None:
    assert "is a directory: use list_directory" in refused(root, "sub")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_refuses_a_fifo_without_hanging(root: Path) -> None:
    os.mkfifo(root / "pipe")
    assert "not a regular file" in refused(root, "pipe")


def test_missing_file(root: Path) -> None:
    assert "no such file: nope.txt" in refused(root, "nope.txt")


def test_truncation_marker_and_pages(root: Path) -> None:
    text = "".join(f"line {i:05d}\n" for i in range(3000))  # 33000 characters
    (root / "big.txt").write_text(text, encoding="utf-8")
    first = read(root, path="big.txt", max_chars=20000)
    body, marker = first.rsplit("\n[", 1)
    assert body == text[:20000]
    assert marker == (
        f"… truncated: showed 20000 of {len(text)} characters (page 1 of 2); "
        "pass page=2 to continue]"
    )
    second = read(root, path="big.txt", max_chars=20000, page=2)
    assert second.startswith(text[20000:20100])
    assert f"showed characters 20001-{len(text)} of {len(text)}" in second
    assert "continue" not in second
    with pytest.raises(ToolError, match="page 3 is out of range"):
        read(root, path="big.txt", max_chars=20000, page=3)


def test_default_cap(root: Path) -> None:
    (root / "huge.txt").write_text("x" * 50_000, encoding="utf-8")
    out = read(root, path="huge.txt")
    assert out.count("x") == files.DEFAULT_MAX_CHARS
    assert "[… truncated: showed 20000 of 50000 characters" in out


def test_max_chars_is_bounded_by_the_schema(root: Path) -> None:
    with pytest.raises(ToolError, match="argument 'max_chars' must be at most 100000"):
        read(root, path="notes.md", max_chars=10**9)


def test_file_larger_than_the_read_limit(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "MAX_READ_BYTES", 1000)
    (root / "log.txt").write_text("y" * 5000, encoding="utf-8")
    out = read(root, path="log.txt", max_chars=500)
    assert "of 1000 characters read from the first 1000 bytes of a 4.9 KB file" in out


def test_pdf_by_page(root: Path) -> None:
    make_pdf(root / "report.pdf", ["Hello page one", "Second page text", "Third"])
    whole = read(root, path="report.pdf")
    assert "--- page 1 ---\nHello page one" in whole
    assert "--- page 2 ---\nSecond page text" in whole
    assert read(root, path="report.pdf", page=2).strip() == "Second page text"
    with pytest.raises(ToolError, match="page 4 is out of range: report.pdf has 3 page"):
        read(root, path="report.pdf", page=4)


def test_pdf_truncation(root: Path) -> None:
    make_pdf(root / "long.pdf", ["alpha " * 50, "beta " * 50])
    out = read(root, path="long.pdf", max_chars=100)
    assert re.search(r"\[… truncated: showed 100 of \d+ characters, a 2-page PDF", out)


def test_encrypted_pdf_is_refused(root: Path) -> None:
    make_pdf(root / "locked.pdf", ["secret"], encrypt_password="pw")
    assert "encrypted PDF" in refused(root, "locked.pdf")


def test_corrupt_pdf_is_a_tool_error(root: Path) -> None:
    (root / "broken.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf")
    assert "cannot read PDF broken.pdf" in refused(root, "broken.pdf")


def list_dir(root: Path, **args: object) -> str:
    return tools_for(root)["list_directory"].run(args)


def test_list_directory(root: Path) -> None:
    (root / ".hidden").write_text("h", encoding="utf-8")
    out = list_dir(root)
    lines = out.splitlines()
    assert lines[0] == f"{root} (2 entries; 1 hidden not shown, pass show_hidden=true to see them)"
    assert lines[1:] == ["dir   sub/", "file  notes.md  (17 bytes)"]
    shown = list_dir(root, show_hidden=True)
    assert "file  .hidden  (1 bytes)" in shown
    assert list_dir(root, path="sub").splitlines()[1:] == ["file  deep.txt  (9 bytes)"]


def test_list_directory_caps_entries(root: Path) -> None:
    many = root / "many"
    many.mkdir()
    for i in range(files.MAX_ENTRIES + 5):
        (many / f"f{i:04d}").write_text("", encoding="utf-8")
    out = list_dir(root, path="many")
    total = files.MAX_ENTRIES + 5
    assert out.endswith(f"[… truncated: showed {files.MAX_ENTRIES} of {total} entries]")


def test_list_directory_shares_the_sandbox(root: Path, tmp_path: Path) -> None:
    (root / "up").symlink_to(tmp_path)
    for path in ("/etc", "..", "up", "/proc/self"):
        with pytest.raises(ToolError, match="refused"):
            list_dir(root, path=path)
    with pytest.raises(ToolError, match="not a directory: use read_file"):
        list_dir(root, path="notes.md")


def test_symlinks_are_listed_not_followed(root: Path, tmp_path: Path) -> None:
    (root / "out").symlink_to(tmp_path / "outside.txt")
    assert "link  out" in list_dir(root)


def test_sandbox_resolves_before_checking(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    sandbox = Sandbox([tmp_path / "alias"], base=tmp_path)
    assert sandbox.roots == (real,)
    assert sandbox.resolve(str(tmp_path / "alias" / "x")) == real / "x"


def test_file_tools_are_core_with_examples(root: Path) -> None:
    for tool in tools_for(root).values():
        assert tool.core and 2 <= len(tool.examples) <= 4
