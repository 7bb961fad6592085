"""OCR in ingest: scanned PDFs and image files read by the real Tesseract (issue 27).

Pages are made here (tests/ocrpages.py: known text in real fonts, turned and noised) and
kept small, so each is read in about a second. Tesseract runs as one process per page, so
it is a real component with the four fault tests: it hangs (SIGSTOP: the page fails alone
at the per-page limit), dies (SIGKILL: the file fails, exit 5), restarts (the next run
reads the file with a new process) and refuses (a missing language pack: one line).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli import ROOT, invoke, run, validate_packets
from tests.faults import Faults, children
from tests.ocrpages import LINES as OCR_LINES
from tests.ocrpages import cer, page, require_ocr, save_pdf, save_tiff
from tests.requires import unavailable
from tests.standin import Reply

FACT = "The vault combination for the archive room is heliotrope seven."
LINES = [
    "Invoices from the hosting company arrive on the first working day",
    "and must be approved by the finance team within ten days.",
]


@pytest.fixture(autouse=True)
def _tesseract() -> None:
    require_ocr()


def _scans(folder: Path) -> Path:
    """A scanned PDF of two pages (the fact on page 2), a PNG and a two-page TIFF."""
    folder.mkdir(parents=True, exist_ok=True)
    first = page(LINES, dpi=300, angle=1.5, noise=0.001, width_in=6)
    second = page([FACT], font="Liberation Serif", dpi=300, angle=-2, noise=0.001, width_in=6)
    save_pdf(folder / "scan.pdf", [first, second], 300)
    page(["Quarterly backup jobs pause during the maintenance window."], dpi=200,
         width_in=6).save(folder / "note.png", dpi=(200, 200))  # fmt: skip
    frames = [page([f"Ledger sheet number {n} of the warehouse."], dpi=200, width_in=5)
              for n in (1, 2)]  # fmt: skip
    save_tiff(folder / "ledger.tiff", frames, 200)
    return folder


def _docs() -> dict[str, dict]:
    listed = invoke("docs", "list", "--json").records()
    return {Path(r["path"]).name: r for r in listed
            if r.get("type") == "document" and r["status"] != "failed"}  # fmt: skip


def test_scans_and_images_are_read_searched_and_cited_by_page(standin, tmp_path):
    scans = _scans(tmp_path / "scans")
    (scans / "plain.md").write_text("# Plain\n\nA note with a text layer of its own.\n")
    r = invoke("ingest", str(scans), "--json")
    assert r.exit_code == 0, r.stderr
    summary = r.records()[-1]
    assert summary["added"] == 4 and summary["failed"] == 0
    hits = invoke("search", "vault combination archive room", "--json").records()
    top = hits[0]
    assert Path(top["path"]).name == "scan.pdf" and top["page"] == 2
    assert "heliotrope" in top["text"] and top["ocr"] is True
    assert 60 <= top["ocr_confidence"] <= 100
    chunks = invoke("docs", "show", str(scans / "ledger.tiff"), "--json").records()
    assert [c["page"] for c in chunks] == [1, 2] and all(c["ocr"] for c in chunks)
    assert "Ledger sheet number 2" in chunks[1]["text"]
    plain = invoke("docs", "show", str(scans / "plain.md"), "--json").records()
    assert "ocr" not in plain[0]  # a text layer is not OCR's
    # An unchanged rerun never OCRs again: with no Tesseract on PATH it still reads
    # nothing and fails nothing (an OCR attempt would fail the PDF or skip the images).
    again = run("ingest", str(scans), "--json", env={"PATH": "/nonexistent"})
    assert again.exit_code == 0, again.stderr
    assert again.records()[-1]["unchanged"] == 4 and again.records()[-1]["failed"] == 0


def test_the_sources_packet_says_a_passage_was_read_by_ocr(standin, tmp_path):
    scans = tmp_path / "scans"
    scans.mkdir()
    save_pdf(scans / "scan.pdf", [page([FACT], dpi=300, width_in=6)], 300)
    assert invoke("ingest", str(scans)).exit_code == 0
    standin.script(Reply(content="Heliotrope seven [Source: scan.pdf, chunk 0, page 1]."))
    r = invoke("chat", "--json", "--no-condense", "what is the vault combination?")
    assert r.exit_code == 0, r.stderr
    packets = r.records()
    validate_packets(packets)
    top = next(p["payload"] for p in packets if p["type"] == "sources")["results"][0]
    assert top["page"] == 1 and top["ocr"] is True and top["ocr_confidence"] > 60


def test_character_error_rate_of_two_fonts_at_two_resolutions(tmp_path):
    """The README's targets on a small set: <= 2% at 300 dpi, <= 5% at 150 dpi."""
    from localgpt_cli.rag.parse import parse_file
    from localgpt_cli.rag.parse.ocr import OcrSettings

    settings = OcrSettings()
    for i, (font, dpi, limit) in enumerate(
        [("DejaVu Sans", 300, 0.02), ("Liberation Serif", 150, 0.05)]
    ):
        image = page(LINES, font=font, dpi=dpi, angle=2 if i else -2, noise=0.001, width_in=6)
        if i:  # a TIFF declares its resolution as a fraction, which Tesseract must be told
            scan = save_tiff(tmp_path / f"p{dpi}.tiff", [image], dpi)
        else:
            scan = tmp_path / f"p{dpi}.png"
            image.save(scan, dpi=(dpi, dpi))
        doc = parse_file(scan, ocr=settings)
        rate = cer("\n".join(LINES), doc.sections[0].text)
        assert rate <= limit, (font, dpi, rate, doc.sections[0].text)


def test_without_tesseract_scans_fail_alone_with_the_package_to_install(standin, tmp_path):
    scans = _scans(tmp_path / "scans")
    (scans / "plain.md").write_text("# Plain\n\nA note with a text layer of its own.\n")
    r = run("ingest", str(scans), "--json", env={"PATH": "/nonexistent"})
    assert r.exit_code == 5, r.stderr
    events = {Path(e["path"]).name: e for e in r.records() if e["type"] == "document"}
    assert events["plain.md"]["status"] == "added"
    failed = events["scan.pdf"]
    assert failed["status"] == "failed" and failed["code"] == "no_text"
    assert "apt install tesseract-ocr" in failed["message"]
    assert events["note.png"]["status"] == "skipped"  # as before OCR: an image is skipped
    assert "apt install tesseract-ocr" in events["note.png"]["message"]
    assert r.stderr.count("\n") == 1 and "1 file(s) failed" in r.stderr


def test_a_picture_skipped_for_want_of_tesseract_is_read_once_it_is_installed(
    standin, tmp_path, isolated_env, monkeypatch
):
    """The manifest says why a picture was skipped: with OCR off or without Tesseract it
    is read, though unchanged, by the first run that can; a damaged one stays skipped,
    unsaid."""
    scans = tmp_path / "scans"
    scans.mkdir()
    page([FACT], dpi=200, width_in=6).save(scans / "note.png", dpi=(200, 200))
    (scans / "cut.png").write_bytes((scans / "note.png").read_bytes()[:300])
    r = invoke("ingest", str(scans), "--ocr", "never", "--json")  # skipped: OCR is off
    assert r.exit_code == 0 and r.records()[-1]["skipped"] == 2, r.stderr
    with monkeypatch.context() as without:  # OCR on again, but no Tesseract: read, skipped
        without.setenv("PATH", "/nonexistent")
        r = invoke("ingest", str(scans), "--json")
    assert r.exit_code == 0, r.stderr
    events = {Path(e["path"]).name: e for e in r.records() if e["type"] == "document"}
    assert all(e["status"] == "skipped" and "apt install tesseract-ocr" in e["message"]
               for e in events.values()) and len(events) == 2, events
    manifest = isolated_env / "localgpt" / "lancedb" / "_localgpt" / "manifests"
    lines = [json.loads(x) for x in (manifest / "default.jsonl").read_text().splitlines()]
    assert {Path(x["path"]).name: x["skip"] for x in lines if "skip" in x} == {
        "note.png": "ocr_unavailable", "cut.png": "ocr_unavailable"}
    r = invoke("ingest", str(scans), "--json")  # Tesseract is on PATH now
    assert r.exit_code == 0, r.stderr
    events = {Path(e["path"]).name: e for e in r.records() if e["type"] == "document"}
    assert events["note.png"]["status"] == "added"
    assert events["cut.png"]["status"] == "skipped" and "unreadable image" in \
        events["cut.png"]["message"]
    top = invoke("search", "vault combination", "--json").records()[0]
    assert Path(top["path"]).name == "note.png" and "heliotrope" in top["text"]
    r = invoke("ingest", str(scans))  # as cron runs it: the damaged picture is not said
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", ""), r


def test_ocr_never_leaves_scans_as_they_were(standin, tmp_path):
    scans = _scans(tmp_path / "scans")
    r = invoke("ingest", str(scans), "--ocr", "never", "--json")
    assert r.exit_code == 5
    events = {Path(e["path"]).name: e for e in r.records() if e["type"] == "document"}
    assert events["scan.pdf"]["code"] == "no_text" and "ocrmypdf" in events["scan.pdf"]["message"]
    assert events["note.png"]["status"] == "skipped"


def test_a_missing_language_pack_is_one_clear_line_and_nothing_stored_is_lost(
    standin, tmp_path, isolated_env
):
    _stored_note(tmp_path)
    scans = tmp_path / "scans"
    scans.mkdir()
    save_pdf(scans / "scan.pdf", [page(LINES, dpi=200, width_in=6)], 200)
    _config(isolated_env, 'ocr_languages = "eng+zzz"')
    r = run("ingest", str(scans), "--json")
    assert r.exit_code == 5, r.stderr
    event = next(e for e in r.records() if e["type"] == "document")
    assert event["code"] == "ocr_language"
    assert "OCR language zzz is not installed" in event["message"]
    assert "apt install tesseract-ocr-zzz" in event["message"]
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "note.md" in _docs()


def test_german_is_read_with_its_language_pack(tmp_path):
    from localgpt_cli.rag.parse import parse_file
    from localgpt_cli.rag.parse.ocr import OcrSettings, installed_languages

    if "deu" not in installed_languages(shutil.which("tesseract") or "tesseract"):
        unavailable("Tesseract's German pack is not installed (apt install tesseract-ocr-deu)")
    text = "Die Größe der Prüfung hängt von der Übung ab."
    png = tmp_path / "de.png"
    page([text], dpi=300, width_in=6).save(png, dpi=(300, 300))
    doc = parse_file(png, ocr=OcrSettings(languages="eng+deu"))
    assert cer(text, doc.sections[0].text) <= 0.05, doc.sections[0].text


# --- Tesseract's faults: each page is a `tesseract` process of the ingest's own -------------


class _TesseractOf:
    """The Tesseract processes reading pages for one command (a tests/faults.py component)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def pids(self) -> list[int]:
        found, todo = [], [self.pid]
        while todo:
            for child in children(todo.pop()):
                todo.append(child)
                with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                    argv = cmdline.read().split(b"\0")
                if Path(argv[0].decode()).name == "tesseract" and b"stdin" in argv:
                    found.append(child)  # reading a page (not listing its languages)
        return found

    def start(self) -> None:
        """Nothing to start: the next page starts a Tesseract of its own."""


def _ingest_with_fault(folder: Path, fault: str, deadline: float) -> tuple[int, list[dict], str]:
    """`localgpt ingest FOLDER --json` with its first Tesseract hung or killed as soon as
    it starts; the run must end within `deadline` seconds."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "localgpt_cli", "ingest", str(folder),
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT)  # fmt: skip
    faults = Faults(_TesseractOf(proc.pid))
    try:
        while not (seen := faults.component.pids()):
            assert proc.poll() is None and time.monotonic() - start < deadline, "no Tesseract"
            time.sleep(0.01)
        # The processes just seen, stopped at once: looking in /proc again to kill them
        # gave a fast page time to finish first (seen once on a loaded machine).
        faults.hang(seen)
        if fault == "kill":
            faults.kill(seen)
        out, err = proc.communicate(timeout=deadline)
    finally:
        faults.resume()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, [json.loads(line) for line in out.splitlines()], err


def _stored_note(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "note.md").write_text("# Note\n\nStored before the fault.\n")
    assert invoke("ingest", str(notes)).exit_code == 0


def _config(isolated_env: Path, line: str) -> None:
    folder = isolated_env / "config" / "localgpt"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(f"[ingest]\n{line}\n")


def test_a_hung_tesseract_fails_its_page_alone_at_the_page_time_limit(
    standin, tmp_path, isolated_env
):
    _stored_note(tmp_path)
    scans = tmp_path / "scans"
    scans.mkdir()
    pages = [page(LINES, dpi=200, width_in=6), page([FACT], dpi=200, width_in=6)]
    save_pdf(scans / "scan.pdf", pages, 200)
    _config(isolated_env, "ocr_page_timeout = 3")
    code, records, err = _ingest_with_fault(scans, "hang", deadline=60)
    assert code == 0, err
    warnings = [json.loads(line)["message"] for line in err.splitlines()]  # --json: NDJSON
    assert any("page 1: OCR failed (Tesseract gave no text in 3 s" in w for w in warnings), err
    assert records[-1]["added"] == 1
    top = invoke("search", "vault combination", "--json").records()[0]
    assert top["page"] == 2 and "heliotrope" in top["text"]  # the next page was read
    assert "note.md" in _docs()


def test_a_killed_tesseract_fails_the_file_and_the_next_run_reads_it(standin, tmp_path):
    _stored_note(tmp_path)
    scans = tmp_path / "scans"
    scans.mkdir()
    # A page of ~1 s of Tesseract's time: it cannot end between being seen and stopped.
    save_pdf(scans / "scan.pdf", [page([*OCR_LINES, FACT], dpi=300)], 300)
    code, records, err = _ingest_with_fault(scans, "kill", deadline=60)
    assert code == 5, err
    event = next(e for e in records if e["type"] == "document")
    assert event["code"] == "ocr_failed"
    assert event["message"].endswith("page 1: OCR failed (Tesseract died (SIGKILL))")
    assert "1 file(s) failed" in err and err.count("\n") == 1
    assert set(_docs()) == {"note.md"}
    # restart: the next run starts a new Tesseract and reads the file.
    again = invoke("ingest", str(scans), "--json")
    assert again.exit_code == 0 and again.records()[-1]["added"] == 1
    assert set(_docs()) == {"note.md", "scan.pdf"}


def test_real_text_layers_are_kept_and_garbled_ones_are_not():
    """The limits of rag/parse/textlayer.py against the pages they were measured on."""
    from localgpt_cli.pdf_text import open_pdf
    from localgpt_cli.rag.parse.textlayer import is_garbled, is_sparse

    real = [Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf"),
            Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf")]  # fmt: skip
    if not all(p.exists() for p in real):
        unavailable("Debian's libtasn1-doc and shared-mime-info PDFs are not installed")
    for pdf_path in real:
        with open_pdf(pdf_path) as pdf:
            texts = [pdf.text(n) for n in range(1, pdf.count + 1)]
        assert not any(is_sparse(t) or is_garbled(t) for t in texts), pdf_path
    sentence = "The quarterly maintenance window starts on Tuesday at nine in the evening"
    assert is_garbled("".join(f"/g{ord(c)}" for c in sentence))  # glyph names, no Unicode
    assert is_garbled("".join(chr(0xE000 + ord(c)) if c.isalpha() else c for c in sentence))
    assert is_sparse("  12 \n") and not is_garbled(sentence)
