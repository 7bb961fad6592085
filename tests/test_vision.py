"""Pictures for vision models (issue 27): `chat --image`, piped pictures, `-f PDF --pages`
and `read_file` on an image, on both wires, with the refusals, through the CLI.

The stand-ins' vision models answer with the size and sha256 of each picture they
received (tests/standin.py `seen_reply`), so each test checks the bytes that reached the
wire, not only that something was sent.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from localgpt_cli.images import MAX_SIDE
from tests.cli import ROOT, invoke
from tests.openai_standin import Answer, OpenAIStandIn, ToolCall
from tests.pdfgen import make_pdf
from tests.standin import Reply, seen_reply

FIND = "localgpt models --json | jq -r 'select(.capabilities | index(\"vision\")) | .name'"


def png(width: int = 32, height: int = 24, color: tuple[int, int, int] = (200, 30, 30),
        kind: str = "PNG") -> bytes:
    """A real picture, encoded by Pillow."""
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, kind)
    return out.getvalue()


def _header_only(width: int, height: int) -> bytes:
    """A PNG claiming width x height with an empty IDAT: no pixel data at all."""
    def chunk(body: bytes) -> bytes:
        return (len(body) - 4).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    ihdr = b"IHDR" + width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\0\0\0"
    return b"\x89PNG\r\n\x1a\n" + chunk(ihdr) + chunk(b"IDAT") + chunk(b"IEND")


def sees(*pictures: bytes) -> str:
    """What a stand-in vision model answers to exactly these bytes."""
    return seen_reply(list(pictures))


@pytest.fixture
def vision(standin):
    """The stand-in with a vision model (`eyes`) and a text-only one (`blind`)."""
    standin.add_model("eyes", capabilities=("completion", "vision"))
    standin.add_model("blind", capabilities=("completion", "tools"))
    return standin


def history_db() -> Path:
    return Path(os.environ["LOCALGPT_HOME"]) / "history.db"


def stored(sql: str) -> list[tuple]:
    with sqlite3.connect(history_db()) as conn:
        return conn.execute(sql).fetchall()


def test_image_reaches_the_ollama_wire_byte_for_byte_and_history_keeps_its_hash(vision, tmp_path):
    data = png()
    (tmp_path / "a.png").write_bytes(data)
    r = invoke("chat", "-m", "eyes", "--image", str(tmp_path / "a.png"), "what is this?")
    assert (r.exit_code, r.stdout) == (0, sees(data) + "\n"), r.stderr
    user = vision.chat_requests()[-1]["messages"][-1]
    assert user["content"] == "what is this?" and len(user["images"]) == 1
    (meta,) = stored("SELECT metadata FROM messages WHERE role = 'user'")
    ref = json.loads(meta[0])["images"][0]
    assert ref == {"source": str(tmp_path / "a.png"), "sha256": hashlib.sha256(data).hexdigest(),
                   "bytes": len(data), "media_type": "image/png", "width": 32, "height": 24}
    assert stored("SELECT count(*) FROM message_images") == [(0,)]  # bytes not kept


def test_a_piped_picture_is_shown_not_refused_as_binary(vision):
    data = png(color=(1, 2, 3))
    r = invoke("chat", "-m", "eyes", "describe it", input=data)
    assert (r.exit_code, r.stdout) == (0, sees(data) + "\n"), r.stderr


def test_piped_text_that_starts_like_a_bmp_is_text(vision):
    """"BM" alone is how a BMP starts — and "BM25 ranking…": text stays text."""
    r = invoke("chat", "-m", "eyes", "summarise", input=b"BM25 ranking explained\n")
    assert r.exit_code == 0, r.stderr
    assert "BM25 ranking explained" in json.dumps(vision.chat_requests()[-1]["messages"])


@pytest.mark.parametrize("args, says", [
    (["--schema", "title", "--each", "--image", "PIC"], "--image and --pages go with one"),
    (["-f", "PDF", "--pages", "1-1000000"], "at most 50 pages at once"),
])
def test_pictures_that_cannot_go_are_usage_errors(vision, tmp_path, args, says):
    (tmp_path / "a.png").write_bytes(png())
    make_pdf(tmp_path / "a.pdf", ["one page"])
    args = [{"PIC": str(tmp_path / "a.png"), "PDF": str(tmp_path / "a.pdf")}.get(a, a)
            for a in args]
    r = invoke("chat", "-m", "eyes", *args, "what is it?", input=b"one\ntwo\n")
    assert r.exit_code == 2 and says in r.stderr, r.stderr
    assert not vision.chat_requests()


def test_image_dash_reads_the_picture_from_stdin_in_a_real_process(vision):
    data = png(kind="JPEG")
    p = subprocess.run([sys.executable, "-m", "localgpt_cli", "chat", "-m", "eyes", "--image",
                        "-", "what is it?"], input=data, capture_output=True, cwd=ROOT,
                       env=os.environ.copy(), timeout=60)  # fmt: skip
    assert (p.returncode, p.stdout.decode()) == (0, sees(data) + "\n"), p.stderr


def test_two_pictures_and_a_large_webp_downscaled_to_png(vision, tmp_path):
    small, big = png(), png(3000, 1200, kind="WEBP")
    (tmp_path / "s.png").write_bytes(small)
    (tmp_path / "b.webp").write_bytes(big)
    r = invoke("chat", "--json", "-m", "eyes", "--image", str(tmp_path / "s.png"),
               "--image", str(tmp_path / "b.webp"), "compare")
    assert r.exit_code == 0, r.stderr
    sent = [base64.b64decode(i)
            for i in vision.chat_requests()[-1]["messages"][-1]["images"]]
    assert sent[0] == small
    wire = Image.open(io.BytesIO(sent[1]))
    assert (wire.format, wire.size) == ("PNG", (MAX_SIDE, 819))
    tokens = "".join(p["payload"] for p in r.records() if p["type"] == "token")
    assert tokens == sees(*sent)
    assert "b.webp: downscaled from 3000x1200; sent as image/png, 2048x819." in r.stderr


def _refused(r, code: int, text: str, standin) -> None:
    """One line on stderr with `text`, the exit code, no chat request, nothing stored."""
    assert r.exit_code == code, r.stderr
    assert r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and text in r.stderr, r.stderr
    assert standin.chat_requests() == []
    assert not history_db().exists() or stored("SELECT count(*) FROM messages") == [(0,)]


def test_a_model_without_vision_is_refused_with_how_to_find_one(vision, tmp_path):
    (tmp_path / "a.png").write_bytes(png())
    r = invoke("chat", "-m", "blind", "--image", str(tmp_path / "a.png"), "what is this?")
    _refused(r, 2, "blind cannot see images", vision)
    assert FIND in r.stderr


def test_a_picture_given_as_a_text_file_names_the_flags_that_send_it(vision, tmp_path):
    (tmp_path / "a.png").write_bytes(png())
    r = invoke("chat", "-m", "eyes", "-f", str(tmp_path / "a.png"), "what is this?")
    _refused(r, 6, "a.png is a picture, not a text file; nothing was sent.", vision)
    assert f"--image {tmp_path / 'a.png'} --ocr" in r.stderr


@pytest.mark.parametrize("name, data, says", [
    ("notes.png", b"just some text, named like a picture\n", "is not an image"),
    ("cut.png", png(300, 300)[:200], "cannot be read as an image"),
    # a header claiming 20000x20000 pixels: refused before anything is decoded
    ("huge.png", _header_only(20000, 20000), "is too large: over 80 megapixels"),
    ("bomb.png", _header_only(9000, 9000), "is too large: over 80 megapixels"),
])
def test_what_is_not_a_readable_picture_is_one_line_and_exit_6(vision, tmp_path, name, data, says):
    (tmp_path / name).write_bytes(data)
    r = invoke("chat", "-m", "eyes", "--image", str(tmp_path / name), "what is this?")
    _refused(r, 6, says, vision)


def test_the_find_a_vision_model_recipe_works(vision):
    jq = subprocess.run(f"{sys.executable} -m localgpt_cli {FIND.removeprefix('localgpt ')}",
                        shell=True, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert (jq.returncode, jq.stdout) == (0, "eyes:latest\n"), jq.stderr


def test_pdf_pages_are_pictures_for_a_vision_model_and_text_for_another(vision, tmp_path):
    pdf = make_pdf(tmp_path / "scan.pdf", ["first page", "second page", "third page"])
    r = invoke("chat", "-m", "eyes", "-f", str(pdf), "--pages", "2-3", "read it")
    assert r.exit_code == 0, r.stderr
    request = vision.chat_requests()[-1]
    sent = [base64.b64decode(i) for i in request["messages"][-1]["images"]]
    assert [Image.open(io.BytesIO(s)).size for s in sent] == [(1275, 1651)] * 2  # 150 dpi
    assert r.stdout == sees(*sent) + "\n"
    assert "second page" not in json.dumps(request)  # the pages went as pictures only
    r = invoke("chat", "-m", "blind", "--no-tools", "-f", str(pdf), "--pages", "2", "read it")
    assert r.exit_code == 0, r.stderr
    text = json.dumps(vision.chat_requests()[-1])
    assert "second page" in text and "first page" not in text and "images" not in text
    r = invoke("chat", "-m", "eyes", "-f", str(pdf), "--pages", "4", "read it")
    assert r.exit_code == 6 and "scan.pdf has 3 page(s); page 4 is not in it" in r.stderr


def test_read_file_shows_a_picture_to_a_vision_model_and_tells_a_text_model(vision, tmp_path,
                                                                           monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = png(64, 48)
    (tmp_path / "shot.png").write_bytes(data)
    vision.add_model("eyes-tools", capabilities=("completion", "vision", "tools"))
    call = Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "shot.png"}}])
    vision.script(call, model="eyes-tools")
    r = invoke("chat", "-m", "eyes-tools", "-T", "read_file", "what does shot.png show?")
    assert (r.exit_code, r.stdout) == (0, sees(data) + "\n"), r.stderr
    after = vision.chat_requests()[-1]["messages"]
    assert after[-2]["role"] == "tool" and "attached to the next message" in after[-2]["content"]
    assert after[-1]["role"] == "user" and len(after[-1]["images"]) == 1
    (meta,) = stored("SELECT metadata FROM messages WHERE role = 'tool'")
    assert json.loads(meta[0])["images"][0]["sha256"] == hashlib.sha256(data).hexdigest()
    vision.script(call, Reply(content="I cannot see it."), model="blind")
    r = invoke("chat", "-m", "blind", "-T", "read_file", "what does shot.png show?")
    assert (r.exit_code, r.stdout) == (0, "I cannot see it.\n"), r.stderr
    after = vision.chat_requests()[-1]["messages"]
    assert "this model cannot see images" in after[-1]["content"]
    assert not any("images" in m for m in after)


def test_history_shows_and_exports_which_pictures_a_turn_had(vision, tmp_path):
    data = png()
    (tmp_path / "a.png").write_bytes(data)
    assert invoke("chat", "-m", "eyes", "--image", str(tmp_path / "a.png"), "hi").exit_code == 0
    line = (f"image: {tmp_path / 'a.png'} (image/png, 32x24, {len(data):,} bytes, "
            f"sha256 {hashlib.sha256(data).hexdigest()[:12]}…)")
    assert line in invoke("history", "show", "latest").stdout.splitlines()
    markdown = invoke("history", "export", "latest", "-f", "markdown").stdout
    assert f"- {line}" in markdown.splitlines()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, vision, monkeypatch) -> str:
    if request.param == "postgres":
        monkeypatch.setenv("LOCALGPT_HISTORY_URL", request.getfixturevalue("pg_url"))
    return str(request.param)


def _kept(backend: str) -> list[tuple]:
    sql = "SELECT message_id, sha256, media_type, data FROM {}message_images"
    if backend == "sqlite":
        return [tuple(row) for row in stored(sql.format(""))]
    import psycopg

    with psycopg.connect(os.environ["LOCALGPT_HISTORY_URL"]) as conn:
        return [tuple(row) for row in conn.execute(sql.format("localgpt_"))]


def test_keep_images_stores_the_bytes_until_the_conversation_is_deleted(backend, vision,
                                                                       tmp_path):
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[history]\nkeep_images = true\n")
    data = png(color=(9, 9, 9))
    (tmp_path / "a.png").write_bytes(data)
    assert invoke("chat", "-m", "eyes", "--image", str(tmp_path / "a.png"), "hi").exit_code == 0
    question = invoke("history", "show", "latest", "--json").records()[0]
    assert _kept(backend) == [(question["id"], hashlib.sha256(data).hexdigest(), "image/png",
                               data)]
    assert invoke("history", "rm", "-y", question["conversation_id"]).exit_code == 0
    assert _kept(backend) == []


@pytest.fixture
def wire(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStandIn]:
    """The OpenAI-wire stand-in with a vision model `seer` and a text one `plain`, as
    profile `work`, whose capabilities list says which can see."""
    with OpenAIStandIn(models=("seer", "plain")) as server:
        server.vision.add("seer")
        config = isolated_env / "config" / "localgpt" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'[providers.work]\nkind = "openai"\nbase_url = "{server.url}"\n'
                          'capabilities = ["vision", "tools"]\n'
                          f'[providers.text]\nkind = "openai"\nbase_url = "{server.url}"\n')
        yield server


def test_the_openai_wire_sends_image_url_parts_with_data_urls(wire, tmp_path):
    data = png(kind="JPEG")
    (tmp_path / "a.jpg").write_bytes(data)
    r = invoke("chat", "-m", "work:seer", "--image", str(tmp_path / "a.jpg"), "what is it?")
    assert (r.exit_code, r.stdout) == (0, sees(data) + "\n"), r.stderr
    content = wire.requests[-1]["body"]["messages"][-1]["content"]
    assert content == [{"type": "text", "text": "what is it?"}, {"type": "image_url", "image_url": {
        "url": "data:image/jpeg;base64," + base64.b64encode(data).decode()}}]
    r = invoke("chat", "-m", "text:plain", "--image", str(tmp_path / "a.jpg"), "what is it?")
    assert r.exit_code == 2 and "plain cannot see images" in r.stderr, r.stderr
    assert len([q for q in wire.requests if q["path"] == "/v1/chat/completions"]) == 1


def test_read_file_on_the_openai_wire_attaches_the_picture_to_a_user_message(wire, tmp_path,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = png(kind="GIF")  # converted to PNG on its way
    (tmp_path / "a.gif").write_bytes(data)
    wire.script(Answer(tool_calls=[ToolCall("read_file", '{"path": "a.gif"}')]))
    r = invoke("chat", "-m", "work:seer", "-T", "read_file", "what is in a.gif?")
    assert r.exit_code == 0, r.stderr
    messages = wire.requests[-1]["body"]["messages"]
    assert messages[-2]["role"] == "tool" and messages[-1]["role"] == "user"
    (part,) = [p for p in messages[-1]["content"] if p["type"] == "image_url"]
    sent = base64.b64decode(part["image_url"]["url"].removeprefix("data:image/png;base64,"))
    assert Image.open(io.BytesIO(sent)).size == (32, 24) and r.stdout == sees(sent) + "\n"


def _version_2_history(backend: str) -> None:
    """A history database as the localgpt before pictures left it (schema version 2)."""
    from localgpt_cli.history import pg_schema, schema

    if backend == "sqlite":
        history_db().parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(history_db(), isolation_level=None)
        for statement in (*schema.MIGRATIONS[0], *schema.MIGRATIONS[1]):
            conn.execute(statement)
        conn.execute("PRAGMA user_version = 2")
        conn.close()
        return
    import psycopg

    with psycopg.connect(os.environ["LOCALGPT_HISTORY_URL"], autocommit=True) as conn:
        conn.execute("CREATE TABLE localgpt_schema (version integer NOT NULL)")
        conn.execute("INSERT INTO localgpt_schema VALUES (2)")
        for statement in (*pg_schema.MIGRATIONS[0], *pg_schema.MIGRATIONS[1]):
            conn.execute(statement)


def test_an_existing_history_is_migrated_to_keep_pictures(backend, vision, tmp_path):
    _version_2_history(backend)
    assert _kept_table_missing(backend)
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "localgpt" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[history]\nkeep_images = true\n")
    data = png(color=(4, 5, 6))
    (tmp_path / "a.png").write_bytes(data)
    assert invoke("chat", "-m", "eyes", "--image", str(tmp_path / "a.png"), "hi").exit_code == 0
    assert [row[3] for row in _kept(backend)] == [data]


def _kept_table_missing(backend: str) -> bool:
    if backend == "sqlite":
        return stored("SELECT count(*) FROM sqlite_master WHERE name = 'message_images'") == [(0,)]
    import psycopg

    with psycopg.connect(os.environ["LOCALGPT_HISTORY_URL"]) as conn:
        return conn.execute("SELECT to_regclass('localgpt_message_images')").fetchone() == (None,)
