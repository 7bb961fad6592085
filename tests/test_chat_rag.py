"""Retrieval in chat: sources packet, cited excerpts in the context, --file, --lock, and
no lancedb import when there is no knowledge base."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.cli import ROOT, invoke, validate_packets
from tests.pdfgen import make_pdf
from tests.standin import Reply

FACT = "The turbine blade coolant flow rate is 4.7 kilograms per second"


def ingest_pdf(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    make_pdf(docs / "report.pdf", [
        "Introduction to the engine test campaign and its goals.",
        FACT + " at full thrust.",
        "Appendix with unrelated tables of pressure readings.",
    ])
    (docs / "notes.md").write_text("# Notes\n\nLunch menus and holiday plans for the team.\n")
    r = invoke("ingest", str(docs))
    assert r.exit_code == 0, r.stderr
    return docs


def test_a_fact_only_in_a_pdf_reaches_the_context_with_its_page(standin, tmp_path):
    ingest_pdf(tmp_path)
    standin.script(Reply(content="About 4.7 kg/s [Source: report.pdf, chunk 1]."))
    r = invoke("chat", "--json", "--no-condense", "what is the turbine blade coolant flow rate?")
    assert r.exit_code == 0, r.stderr
    packets = r.records()
    validate_packets(packets)
    kinds = [p["type"] for p in packets]
    assert kinds.index("sources") < kinds.index("token")
    sources = packets[kinds.index("sources")]["payload"]
    assert sources["query"] == "what is the turbine blade coolant flow rate?"
    assert sources["mode"] == "hybrid"
    top = sources["results"][0]
    assert top["path"].endswith("report.pdf") and top["page"] == 2 and top["rank"] == 1
    assert FACT in top["text"]
    system = [m["content"] for m in standin.chat_requests()[-1]["messages"]
              if m["role"] == "system"]
    block = next(c for c in system if "[Source:" in c)
    assert f"chunk {top['chunk']}, page 2]" in block and FACT in block
    assert "cite" in block


def test_plain_output_lists_the_sources_after_the_answer(standin, tmp_path):
    ingest_pdf(tmp_path)
    standin.script(Reply(content="4.7 kg/s"))
    r = invoke("chat", "turbine blade coolant flow rate?")
    assert r.stdout == "4.7 kg/s\n"
    assert "Sources:" in r.stderr and "report.pdf:2" in r.stderr


def test_no_rag_and_lock_skip_retrieval(standin, tmp_path):
    docs = ingest_pdf(tmp_path)
    r = invoke("chat", "--json", "--no-rag", "turbine coolant?")
    assert r.exit_code == 0, r.stderr
    assert "sources" not in [p["type"] for p in r.records()]
    assert not any("[Source:" in m["content"] for m in standin.chat_requests()[-1]["messages"])
    r = invoke("chat", "--json", "-f", str(docs / "notes.md"), "--lock", "turbine coolant?")
    assert r.exit_code == 0, r.stderr
    assert "sources" not in [p["type"] for p in r.records()]
    system = [m["content"] for m in standin.chat_requests()[-1]["messages"]
              if m["role"] == "system"]
    assert any("Lunch menus" in c and "notes.md" in c for c in system)
    assert not any("[Source:" in c for c in system)


def test_lock_without_files_is_a_usage_error(standin):
    r = invoke("chat", "--lock", "q")
    assert r.exit_code == 2


def test_a_file_too_large_for_the_context_is_cut_in_the_middle(standin, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("START " + "filler words here " * 20000 + " END")
    r = invoke("chat", "-o", "num_ctx", "8192", "-f", str(big), "--lock", "summarise")
    assert r.exit_code == 0
    assert "too large for the context" in r.stderr
    system = next(m["content"] for m in standin.chat_requests()[-1]["messages"]
                  if m["role"] == "system")
    assert "START" in system and "END" in system and "characters cut" in system
    assert len(system) < 8192 * 4
    done = invoke("chat", "--json", "-o", "num_ctx", "8192", "-f", str(big), "--lock",
                  "summarise").records()[-1]["payload"]
    (cut,) = done["cut"]
    assert cut["source"] == "file" and cut["path"] == str(big)
    assert cut["chars"] == len(big.read_text()) and f"{cut['cut_chars']:,} characters" in system


def test_search_documents_tool_is_offered_with_a_knowledge_base(standin, tmp_path):
    ingest_pdf(tmp_path)
    standin.script(
        Reply(tool_calls=[{"name": "search_documents",
                           "arguments": {"query": "coolant flow rate"}}]),
        Reply(content="4.7"),
    )
    r = invoke("chat", "--json", "--no-rag", "look it up")
    result = next(p["payload"] for p in r.records() if p["type"] == "tool_result")
    assert result["ok"] and "[Source:" in result["result"] and "4.7" in result["result"]


def test_retrieval_falls_back_to_keywords_when_embedding_fails(standin, tmp_path):
    ingest_pdf(tmp_path)
    standin.fail_embeds(20, status=500)
    r = invoke("chat", "--json", "--no-tools", "turbine blade coolant flow")
    assert r.exit_code == 0
    sources = next(p["payload"] for p in r.records() if p["type"] == "sources")
    assert sources["mode"] == "keyword"
    assert FACT in sources["results"][0]["text"]


def test_chat_without_a_knowledge_base_never_imports_lancedb(standin):
    code = (
        "import sys\nfrom localgpt_cli.cli.main import main\n"
        "try:\n    main(['chat', '--json', 'hi'])\nexcept SystemExit as e:\n    code = e.code\n"
        "print('LANCEDB=' + str('lancedb' in sys.modules), 'EXIT=' + str(code), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=os.environ.copy(), cwd=ROOT, timeout=60)
    assert "LANCEDB=False EXIT=0" in out.stderr, out.stderr
