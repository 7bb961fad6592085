"""OCR for a model that cannot see (issue 27): read_file on a picture, `chat -f scan.pdf`
(whole, or its `--pages`) on scanned pages, and `chat --image X --ocr` (and a piped
picture), through the CLI against the Ollama stand-in and the real Tesseract; each test
checks the text that reached the wire, and the one line said when Tesseract is not
installed.

Pages are small (a few lines at 200 dpi, tests/ocrpages.py), each read in well under a
second.
"""

from __future__ import annotations

import io
import json

import pytest

from tests.cli import invoke
from tests.ocrpages import page, require_ocr, save_pdf
from tests.standin import Reply, seen_reply

MEMO = ["Invoices from the hosting company arrive on the first working day",
        "and must be approved by the finance team within ten days."]  # fmt: skip
SECRET = "The vault password: heliotrope"
HINT = "apt install tesseract-ocr"


@pytest.fixture(autouse=True)
def _tesseract() -> None:
    require_ocr()


@pytest.fixture
def models(standin):
    """The stand-in with a text model that calls tools (`blind`) and a vision one (`eyes`)."""
    standin.add_model("blind", capabilities=("completion", "tools"))
    standin.add_model("eyes", capabilities=("completion", "vision"))
    return standin


def _png(lines: list[str]) -> bytes:
    out = io.BytesIO()
    page(lines, dpi=200, width_in=6).save(out, "PNG", dpi=(200, 200))
    return out.getvalue()


def _no_tesseract(monkeypatch) -> None:
    """Tesseract gone from PATH (rag/parse/ocr.py looks it up there at each use)."""
    monkeypatch.setenv("PATH", "/nonexistent")


def _one_line(r, code: int, *texts: str) -> None:
    assert r.exit_code == code, r.stderr
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert all(t in r.stderr for t in texts), r.stderr


def test_read_file_gives_a_text_model_the_pictures_ocr_text_redacted(models, tmp_path,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "memo.png").write_bytes(_png([*MEMO, SECRET]))
    call = Reply(tool_calls=[{"name": "read_file", "arguments": {"path": "memo.png"}}])
    models.script(call, Reply(content="It is about invoices."), model="blind")
    r = invoke("chat", "-m", "blind", "-T", "read_file", "what does memo.png say?")
    assert (r.exit_code, r.stdout) == (0, "It is about invoices.\n"), r.stderr
    tool = models.chat_requests()[-1]["messages"][-1]
    assert tool["role"] == "tool" and "read in it:" in tool["content"], tool
    assert "hosting company" in tool["content"] and "finance team" in tool["content"]
    assert "[redacted: password]" in tool["content"] and "heliotrope" not in tool["content"]
    assert "memo.png: redacted" in r.stderr
    # No Tesseract: the tool's one-line error names the package; the turn goes on.
    _no_tesseract(monkeypatch)
    models.script(call, Reply(content="I cannot read it."), model="blind")
    r = invoke("chat", "-m", "blind", "-T", "read_file", "what does memo.png say?")
    assert (r.exit_code, r.stdout) == (0, "I cannot read it.\n"), r.stderr
    tool = models.chat_requests()[-1]["messages"][-1]
    assert tool["content"].startswith("Error: memo.png (image/png") and HINT in tool["content"]
    assert "\n" not in tool["content"]


def test_scanned_pdf_pages_reach_a_text_model_as_their_ocr_text(models, tmp_path,
                                                                monkeypatch):
    pdf = save_pdf(tmp_path / "scan.pdf", [page(MEMO, dpi=200, width_in=6),
                                           page([SECRET], dpi=200, width_in=6)], 200)
    r = invoke("chat", "-m", "blind", "--no-tools", "-f", str(pdf), "--pages", "1", "read it")
    assert r.exit_code == 0, r.stderr
    sent = json.dumps(models.chat_requests()[-1])
    assert "hosting company" in sent and "finance team" in sent and "vault" not in sent
    # the whole file, as -f reads any file: every page read by OCR
    r = invoke("chat", "-m", "blind", "--no-tools", "-f", str(pdf), "read it")
    assert r.exit_code == 0, r.stderr
    sent = json.dumps(models.chat_requests()[-1])
    assert "finance team" in sent and "vault password" in sent
    _no_tesseract(monkeypatch)
    r = invoke("chat", "-m", "blind", "--no-tools", "-f", str(pdf), "--pages", "1-2", "read")
    _one_line(r, 6, "scan.pdf pages 1, 2 have no usable text layer", HINT,
              "nothing was sent")
    r = invoke("chat", "-m", "blind", "--no-tools", "-f", str(pdf), "read")
    _one_line(r, 6, "scan.pdf: no extractable text in 2 page(s)", HINT)
    assert len(models.chat_requests()) == 2


def test_ocr_flag_sends_a_text_model_the_pictures_text(models, tmp_path, monkeypatch):
    data = _png(MEMO)
    (tmp_path / "memo.png").write_bytes(data)
    r = invoke("chat", "-m", "blind", "--no-tools", "--image", str(tmp_path / "memo.png"),
               "--ocr", "who approves the invoices?")
    assert r.exit_code == 0, r.stderr
    request = models.chat_requests()[-1]
    sent = json.dumps(request)
    assert "finance team" in sent and "images" not in sent
    # piped: redacted as piped text is
    r = invoke("chat", "-m", "blind", "--no-tools", "--ocr", "what is it?",
               input=_png([SECRET]))
    assert r.exit_code == 0, r.stderr
    sent = json.dumps(models.chat_requests()[-1])
    assert "[redacted: password]" in sent and "heliotrope" not in sent
    assert "stdin: redacted" in r.stderr
    # a vision model is shown the picture itself
    r = invoke("chat", "-m", "eyes", "--image", str(tmp_path / "memo.png"), "--ocr", "what?")
    assert (r.exit_code, r.stdout) == (0, seen_reply([data]) + "\n"), r.stderr
    asked = len(models.chat_requests())
    _no_tesseract(monkeypatch)
    r = invoke("chat", "-m", "blind", "--image", str(tmp_path / "memo.png"), "--ocr", "what?")
    _one_line(r, 6, "memo.png: OCR cannot read its text here", HINT, "nothing was sent")
    r = invoke("chat", "-m", "blind", "--ocr", "what?", input=b"plain text\n")
    _one_line(r, 2, "--ocr reads the text of pictures")
    assert len(models.chat_requests()) == asked
