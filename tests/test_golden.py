"""Golden output: every command's stdout, stderr and exit code on a fixed corpus, compared
byte for byte with the files under tests/golden/.

Why: a refactor that moves code between modules must not change what a script sees. The
unit tests pin the ideas; this test pins the bytes — NDJSON records and packets, the plain
text a pipe gets, warnings and errors on stderr, exit codes, and the chat requests the
model receives — so a field renamed, a column reordered or a message reworded shows up as
a diff.

One scenario runs once per module, in a fixed order (the order matters: ingest, edit,
re-ingest, prune, search, chat, history, remove), against the Ollama stand-in with
scripted replies; each case is then compared with its golden file `tests/golden/NAME.txt`
(exit code, stdout, stderr). Only what legitimately varies from run to run is normalised
(see `normalise`): the temporary folder (also the working folder), the stand-in's port,
timestamps and dates, generated ids (numbered in order of appearance, so the test still
sees which records share one), durations, the document ids derived from the temporary
paths, and per case what a case says varies (`vary`: queries per second, bytes on disk).

To rewrite the goldens after an intended change of output, run
`LOCALGPT_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py` and review the diff of
tests/golden/ like code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.cli import Result, invoke
from tests.conftest import _LEAKY_ENV, _closed_port
from tests.kb import make_corpus
from tests.standin import Reply, StandIn

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("LOCALGPT_UPDATE_GOLDEN") == "1"

QUERIES = (
    '{"id": "q1", "text": "wireguard tunnel"}\n'
    '{"id": "q2", "text": "passport renewal"}\n'
    '{"id": "q3", "text": "quasar observations"}\n'
)
QRELS = "query-id\tdoc\tscore\nq1\tvpn\t2\nq2\ttodo\t1\nq3\tmanual\t1\nq1\ttodo\t0\n"


@dataclass
class Scenario:
    """What one run of the scenario produced: results by case name, and what varies."""

    root: Path
    standin: StandIn
    closed_url: str = ""  # an Ollama address nobody listens on
    results: dict[str, Result] = field(default_factory=dict)
    varies: dict[str, re.Pattern[str]] = field(default_factory=dict)  # case -> what else varies
    doc_ids: dict[str, str] = field(default_factory=dict)  # document id -> path under root

    def case(self, name: str, *args: str, input: str | None = None, vary: str = "") -> Result:
        """Run `localgpt ARGS` and keep its result as case NAME; `vary` is a regular
        expression for a part of this output that legitimately changes between runs."""
        assert name not in self.results, f"two cases named {name}"
        if vary:
            self.varies[name] = re.compile(vary, re.MULTILINE)
        self.results[name] = result = invoke(*args, input=input)
        return result

    def doc_id(self, path: Path) -> str:
        """The id `ingest` derives from a document's path (the sha256 of the path), noted so
        `normalise` can name the document instead."""
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
        self.doc_ids[digest] = str(path.relative_to(self.root))
        return digest


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """Run every case once, in order, in an isolated environment with its own stand-in
    (as the `isolated_env` and `standin` fixtures do, once for the module)."""
    root = tmp_path_factory.mktemp("golden")
    with pytest.MonkeyPatch.context() as mp:
        for var, sub in (
            ("LOCALGPT_HOME", "localgpt"),
            ("XDG_CONFIG_HOME", "config"),
            ("XDG_CACHE_HOME", "cache"),
            ("XDG_DATA_HOME", "data"),
        ):
            folder = root / "env" / sub
            folder.mkdir(parents=True)
            mp.setenv(var, str(folder))
        for var in _LEAKY_ENV:
            mp.delenv(var, raising=False)
        mp.chdir(root)  # the file tools name the working folder in their descriptions
        server = StandIn().start()
        mp.setenv("OLLAMA_HOST", server.url)
        run = Scenario(root, server, closed_url=f"http://127.0.0.1:{_closed_port()}")
        try:
            notes = _ingest_cases(run)
            _search_and_docs_cases(run, notes)
            _chat_and_history_cases(run)
            _catalogue_cases(run)
            _error_cases(run)
            run.case("docs_rm", "docs", "rm", "-y", "--json", str(notes / "todo.txt"))
            run.case("docs_list_after_rm", "docs", "list", "--json")
            yield run
        finally:
            server.stop()
        assert not server.errors, "the Ollama stand-in crashed:\n" + "\n".join(server.errors)


def _ingest_cases(run: Scenario) -> Path:
    """A dry run on a fresh home, the first run, an unchanged re-run, an edit, a prune and
    a collection with a failing file; returns the corpus folder."""
    notes = make_corpus(run.root / "corpus")
    (notes / "old.md").write_text("# Old\n\nAn obsolete page about the fax machine.\n")
    for path in sorted(notes.rglob("*")):
        run.doc_id(path)
    broken = run.root / "broken"
    broken.mkdir()
    (broken / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj garbage\n%%EOF\n")
    (broken / "fine.txt").write_text("A fine file next to a broken one.\n")
    run.doc_id(broken / "fine.txt")

    run.case("ingest_dry_run_text", "ingest", "--dry-run", str(notes))
    run.case("ingest_dry_run", "ingest", "--json", "--dry-run", str(notes))
    run.case("ingest_first", "ingest", "--json", str(notes))
    run.case("ingest_unchanged", "ingest", "--json", str(notes))
    with (notes / "vpn.md").open("a") as fh:
        fh.write("\n## Split tunnel\n\nRoute only the office subnet through the tunnel.\n")
    run.case("ingest_edited", "ingest", "--json", str(notes))
    (notes / "old.md").unlink()
    run.case("ingest_prune_dry_run_text", "ingest", "--dry-run", "--prune", str(notes))
    run.case("ingest_prune_dry_run", "ingest", "--json", "--dry-run", "--prune", str(notes))
    run.case("ingest_prune", "ingest", "--json", "--prune", str(notes))
    run.case("ingest_failing", "ingest", "--json", "-C", "broken", str(broken))
    run.case("ingest_failing_text", "ingest", "-C", "broken", str(broken))
    return notes


def _search_and_docs_cases(run: Scenario, notes: Path) -> None:
    vpn = run.doc_id(notes / "vpn.md")
    run.case("search_hybrid", "search", "--json", "wireguard tunnel")
    run.case("search_vector", "search", "--json", "--mode", "vector", "wireguard tunnel")
    run.case("search_keyword", "search", "--json", "--mode", "keyword", "wireguard tunnel")
    run.case("search_doc", "search", "--json", "--doc", vpn[:8], "tunnel")
    run.case("search_type", "search", "--json", "--type", "pdf", "quasar")
    run.case("search_k", "search", "--json", "-k", "2", "the")
    run.case("search_text", "search", "wireguard tunnel")
    run.case("search_queries", "search", "--json", "--queries", "-", input="vpn\npassport\n")

    run.case("docs_list", "docs", "list", "--json")
    run.case("docs_list_text", "docs", "list")
    run.case("docs_show", "docs", "show", "--json", str(notes / "vpn.md"))
    run.case("docs_show_text", "docs", "show", str(notes / "vpn.md"))
    run.case("docs_stats", "docs", "stats", "--json",
             vary=r'(?<="bytes":)\d+')  # the size of the table's files on disk  # fmt: skip
    run.case("docs_collections", "docs", "collections", "--json")

    queries, qrels = run.root / "q.jsonl", run.root / "qrels.tsv"
    queries.write_text(QUERIES)
    qrels.write_text(QRELS)
    run.case("eval", "eval", "--json", "--queries", str(queries), "--qrels", str(qrels))
    run.case("eval_text", "eval", "--queries", str(queries), "--qrels", str(qrels), "-k", "3",
             vary=r"(?<=\t)\d+$")  # the last column: queries per second  # fmt: skip


def _chat_and_history_cases(run: Scenario) -> None:
    """A plain answer, one with retrieved sources, a tool call round trip, thinking, the
    same as plain text, a continued conversation; then the history they left."""
    script = run.standin.script
    script(Reply(content="Hello there. How can I help?"))
    plain = run.case("chat_plain", "chat", "--json", "--no-rag", "hello")
    script(Reply(content="Install wireguard and import the office profile."))
    run.case("chat_sources", "chat", "--json", "how do I set up the VPN with wireguard?")
    script(
        Reply(tool_calls=[{"name": "calculator", "arguments": {"expression": "2^10-1"}}]),
        Reply(content="2^10-1 is 1023."),
    )
    tool = run.case("chat_tool", "chat", "--json", "--no-rag", "what is 2^10-1?")
    thinking = run.case("chat_thinking", "chat", "--json", "--no-rag", "-m", "qwen3", "hi")
    script(Reply(content="Hello from a pipe."))
    run.case("chat_text", "chat", "--no-rag", "hello")
    script(Reply(content="Restart the wireguard service."))
    run.case("chat_sources_text", "chat", "the tunnel drops, what now?")
    script(Reply(content="Same again."))
    run.case("chat_continue", "chat", "--json", "--no-rag", "-c", "and again?")

    def conversation(result: Result) -> str:
        return str(result.records()[-1]["payload"]["conversation_id"])

    run.case("history_list", "history", "list", "--json")
    run.case("history_list_text", "history", "list")
    run.case("history_show_tool", "history", "show", "--json", conversation(tool))
    run.case("history_show_thinking", "history", "show", "--json", conversation(thinking))
    run.case("history_show_text", "history", "show", conversation(tool))
    run.case("history_show_thinking_text", "history", "show", conversation(thinking))
    run.case("history_search", "history", "search", "--json", "wireguard")
    run.case("history_export_json", "history", "export", conversation(plain),
             "--format", "json")  # fmt: skip
    run.case("history_export_markdown", "history", "export", conversation(tool),
             "--format", "markdown")  # fmt: skip


def _catalogue_cases(run: Scenario) -> None:
    run.case("models_list", "models", "list", "--json")
    run.case("models_list_text", "models", "list")
    run.case("models_show", "models", "show", "--json", "qwen3")
    run.case("models_show_text", "models", "show", "qwen3")
    run.case("tools_list", "tools", "list", "--json")
    run.case("tools_list_text", "tools", "list")
    run.case("tools_show", "tools", "show", "--json", "calculator")
    run.case("config", "config", "--json")
    run.case("config_text", "config")


def _error_cases(run: Scenario) -> None:
    """Exit codes and the messages on stderr (and the `error` record with --json)."""
    run.case("error_empty_query", "search", "--json", "")
    run.case("error_bad_type", "search", "--type", "spreadsheet", "x")
    run.case("error_unknown_model", "chat", "--json", "--no-rag", "-m", "nosuch", "hi")
    run.case("error_unreachable", "--host", run.closed_url, "chat", "--json", "--no-rag", "hi")
    run.case("error_unknown_conversation", "history", "show", "--json", "0123456789")
    run.case("error_unknown_document", "docs", "show", "--json", "nosuch.md")
    run.case("error_bad_option", "chat", "--no-rag", "-o", "top_p", "7", "hi")
    queries, qrels = run.root / "q.jsonl", run.root / "qrels-bad.tsv"
    qrels.write_text("q1\tnowhere\t1\n")
    run.case("error_bad_qrels", "eval", "--queries", str(queries), "--qrels", str(qrels))
    run.case("error_missing_path", "ingest", "--json", str(run.root / "nowhere"))


# --- normalisation ---------------------------------------------------------------------------

ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
# ISO 8601 in records, `YYYY-MM-DD HH:MM:SS` in text tables
DATE_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?")
# JSON members holding a duration or a clock reading: `"ms":12`, `"embed_ms":3`,
# `"timestamp":1795376804403`, `"seconds":0.014` (null stays null)
DURATION = re.compile(r'("(?:\w+_ms|ms|timestamp|seconds)": ?)-?\d+(?:\.\d+)?(?:e-?\d+)?')
HEX = re.compile(r"\b[0-9a-f]{8,16}\b")  # a document id, or the prefix a table shows


def normalise(text: str, run: Scenario) -> str:
    """Replace what varies between runs with stable placeholders; everything else stays.

    Ids are numbered in order of first appearance within one output, so the test still
    sees which packets share a turn id and which records share a conversation.
    """
    text = text.replace(str(run.root), "<TMP>")
    text = text.replace(run.standin.url, "<OLLAMA>")
    text = text.replace(run.closed_url, "<CLOSED>")
    text = HEX.sub(lambda m: _document(m.group(0), run.doc_ids), text)
    text = _number(ULID, "ID", text)
    text = DATE_TIME.sub("<TIME>", text)
    return DURATION.sub(r"\1<MS>", text)


def _document(hex_id: str, doc_ids: dict[str, str]) -> str:
    """A document id (or the prefix of one a text table shows) named by its file."""
    for full, rel in doc_ids.items():
        if full == hex_id:
            return f"<DOC {rel}>"
        if full.startswith(hex_id):
            return f"<DOC {rel} [:{len(hex_id)}]>"
    return hex_id


def _number(pattern: re.Pattern[str], label: str, text: str) -> str:
    seen: dict[str, str] = {}

    def name(match: re.Match[str]) -> str:
        return seen.setdefault(match.group(0), f"<{label}{len(seen) + 1}>")

    return pattern.sub(name, text)


def render(name: str, run: Scenario) -> str:
    """One golden file: the exit code, then stdout and stderr, each normalised."""
    result = run.results[name]
    text = (
        f"exit: {result.exit_code}\n"
        f"--- stdout\n{normalise(result.stdout, run)}"
        f"--- stderr\n{normalise(result.stderr, run)}"
    )
    vary = run.varies.get(name)
    return vary.sub("<VARIES>", text) if vary else text


# --- the tests -------------------------------------------------------------------------------


def golden_names() -> list[str]:
    return sorted(p.stem for p in GOLDEN.glob("*.txt"))


def test_every_case_has_a_golden_file(scenario: Scenario) -> None:
    """A case added to the scenario without a golden (or a golden left without a case)
    fails here; with LOCALGPT_UPDATE_GOLDEN=1 every golden is written anew."""
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        for stale in set(golden_names()) - set(scenario.results):
            (GOLDEN / f"{stale}.txt").unlink()
        for name in scenario.results:
            (GOLDEN / f"{name}.txt").write_text(render(name, scenario))
    assert sorted(scenario.results) == golden_names()


@pytest.mark.parametrize("name", golden_names())
def test_output_matches_the_golden_file(scenario: Scenario, name: str) -> None:
    assert name in scenario.results, f"tests/golden/{name}.txt has no case"
    assert render(name, scenario) == (GOLDEN / f"{name}.txt").read_text()


def test_the_model_is_sent_the_same_requests(scenario: Scenario) -> None:
    """The chat requests of the scenario (messages with the retrieved context, tools,
    options): what reaches Ollama must not change either."""
    path = GOLDEN / "chat_requests.ndjson"
    bodies = scenario.standin.chat_requests()
    text = normalise("".join(json.dumps(b, ensure_ascii=False) + "\n" for b in bodies), scenario)
    if UPDATE:
        path.write_text(text)
    assert text == path.read_text()
