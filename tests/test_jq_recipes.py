"""Every `jq` recipe of the README and of the --help texts runs as written (issue 25.7).

`localgpt chat --json "hi" | jq -r 'select(.type=="token").payload'` printed one token a
line, and `models --json | jq -r .name` printed `null` when Ollama was down (the error
record has no name). The recipes are read out of README.md (fenced `sh` blocks, whole
commands across continuation lines, and the table's inline code) and out of every
command's epilog, then run by bash with the real jq, against the stand-in, in one prepared
folder; each one's stdout is compared with the text expected here. A recipe added without
an expected text fails the test, and so does an expected text whose recipe is gone.
Then the recipes that ask the server run again with it down: none may print `null`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from localgpt_cli.cli.main import cli
from tests.cli import ROOT
from tests.conftest import _closed_port
from tests.requires import unavailable
from tests.standin import Reply
from tests.test_help_examples import commands

JQ = shutil.which("jq")
ULID = "[0-9A-Z]{26}"
VPN = "# VPN setup\n\nTo reset the VPN, run vpn-reset. Rotate the vpn keys with vpn-rotate.\n"


def readme_recipes() -> Iterator[str]:
    """Each shell command of README.md that pipes into jq."""
    text = (ROOT / "README.md").read_text()
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        command: list[str] = []
        for line in block.splitlines():
            if not command and (not line.strip() or line.lstrip().startswith("#")):
                continue
            command.append(line)
            joined = "\n".join(command)
            if joined.endswith("\\") or not _balanced(joined):
                continue
            if "| jq " in joined:
                yield joined
            command = []
    for code in re.findall(r"`(localgpt [^`]*\| jq [^`]*)`", text):
        yield code.replace("\\|", "|")


def _balanced(text: str) -> bool:
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def help_recipes() -> Iterator[str]:
    """Each example line under a command's --help that pipes into jq."""
    for _, cmd in commands(cli):
        for line in (cmd.epilog or "").splitlines():
            if "| jq " in line:
                yield line.strip()


# What each recipe prints, in the folder `prepare` makes: a regular expression the whole
# stdout must match. Recipes run in this order (each may rely on the ones before it).
EXPECTED: dict[str, str] = {
    """localgpt --host gpu-box:11434 config --json | jq -r 'select(.key=="host").value'""":
        r"http://gpu-box:11434\n",
    """localgpt tools list --json | jq -r 'select(.type=="tool").name'""":
        "calculator\nread_file\nlist_directory\nsearch_documents\nweb_search\nweb_fetch\n"
        "propose_command\npropose_edit\n",
    """localgpt tools show calculator --json | jq 'select(.type=="tool").parameters'""":
        re.escape(json.dumps({"type": "object", "properties": {"expression": {
            "type": "string", "description": "the expression, e.g. '(3 + 4) * sqrt(2) / 5'"}},
            "required": ["expression"], "additionalProperties": False}, indent=2) + "\n"),
    """localgpt memory list -C papers --json | jq -r 'select(.type=="memory").text'""":
        "we deploy with Ansible\ncite by author and year\n",
    """localgpt memory list --json | jq -r 'select(.type=="memory").text'""":
        "we deploy with Ansible\ncite by author and year\n",
    """localgpt models --json | jq -r 'select(.type=="model").name'""":
        r"llama3\.2:latest\nqwen3:latest\ngemma2:latest\nnomic-embed-text:latest\n"
        r"all-minilm:latest\n",
    # the default catalogue has no vision model; tests/test_vision.py runs it with one
    """localgpt models --json | jq -r 'select(.capabilities | index("vision")) | .name'""": "",
    """localgpt models show qwen3 --json | jq 'select(.type=="model_info").capabilities'""":
        re.escape(json.dumps(["completion", "tools", "thinking"], indent=2) + "\n"),
    """localgpt search -k 3 --json "vpn setup" | jq -r 'select(.type=="hit").path'""":
        "WORK/notes/vpn\\.md\n",
    """printf 'vpn\\nbackup\\n' | localgpt search --queries - --json | jq -r 'select(.type=="hit")|[.query_id,.path]|@tsv'""":  # noqa: E501
        "1\tWORK/notes/vpn\\.md\n2\tWORK/notes/backup\\.md\n",
    """localgpt docs list -C papers --json | jq -r 'select(.status=="failed").path'""":
        "WORK/papers/broken\\.pdf\n",
    """localgpt docs list --json | jq -r 'select(.type=="document").path'""":
        "WORK/notes/backup\\.md\nWORK/notes/vpn\\.md\n",
    """localgpt docs show notes/vpn.md --json | jq -r 'select(.type=="chunk").text'""":
        re.escape(VPN),
    """localgpt docs stats --json | jq 'select(.type=="stats").health'""":
        re.escape(json.dumps({"ok": True, "unindexed_rows": 0, "fts_index": {
            "present": True, "stale": False, "indexed_rows": 2, "unindexed_rows": 0},
            "vector_index": {"present": False, "due": False, "indexed_rows": 0,
                             "unindexed_rows": 0}}, indent=2) + "\n"),
    """localgpt eval --queries q.jsonl --qrels q.tsv --json | jq -r 'select(.name=="ndcg@10")'""":
        "".join(re.escape(json.dumps({"type": "metric", "mode": mode, "name": "ndcg@10",
                                      "value": 1, "queries": 1, "collection": "default",
                                      "seconds": 0.5, "rerank": "local"}, indent=2) + "\n"
                          ).replace("0\\.5", r"[0-9.]+")
                for mode in ("keyword", "vector", "hybrid")),
    """localgpt chat --json "hi" | jq -j 'select(.type=="token").payload'""":
        r"Hello from llama3\.2\.",
    """localgpt chat --json "and if it drops?" -c \\
  | jq -c 'select(.type=="sources").payload | {query, rerun, kept: [.kept[].path],
           dropped: [.dropped[] | "\\(.path) \\(.stage):\\(.reason)"], why: .fallback_reason}'""":
        '{"query":"and if it drops\\?","rerun":false,"kept":\\[\\],"dropped":\\['
        '"WORK/notes/(vpn|backup)\\.md threshold:below_threshold",'  # both dropped, either first
        '"WORK/notes/(?!\\1)(vpn|backup)\\.md threshold:below_threshold"\\],'
        '"why":"nothing_kept"}\n',
    """localgpt chat --json "how do I rotate the vpn keys?" \\
  | jq -c 'select(.type=="sources") | .payload.dropped[]? | [.path, .stage, .reason, .scores.gate]'""":  # noqa: E501
        '\\["WORK/notes/backup\\.md","threshold","below_threshold",null\\]\n',
    """localgpt history search "docker compose" --json | jq -r 'select(.type=="search_hit").conversation_id'""":  # noqa: E501
        "ULID\n",
    """localgpt history search -n 5 --json -- "-ENOSPC" | jq -r 'select(.type=="search_hit").conversation_id'""":  # noqa: E501
        "ULID\n",
    """localgpt history last-preview --json | jq -r 'select(.type=="preview").id'""":
        "[0-9a-f]{8}\n",
    """localgpt apply -y 3f9a1c2e --json | jq -r 'select(.type=="applied").backup'""":
        "WORK/notes/vpn\\.md\\.[0-9a-f]{8}\\.bak\n",
    """localgpt history -n 5 --json | jq -r 'select(.type=="conversation").id'""":
        "(ULID\n){5}",
    """localgpt history show latest --json | jq -r 'select(.role=="user") | .id'""":
        "ULID\n",
    """localgpt history show latest --json | jq -r 'select(.role=="assistant").content'""":
        r"Hello from llama3\.2\.\n",
    """localgpt history -n 100 --json | jq -r 'select(.model=="llama3.2").id' | xargs localgpt history rm -y""":  # noqa: E501
        r"(removed ULID  .+ \(\d messages\)\n){5}",
    """localgpt docs list --json | jq -r 'select(.type=="document" and (.path|startswith("/tmp/"))).document_id' | xargs -r localgpt docs rm -y""":  # noqa: E501
        "",  # the removals are told on stderr; the collection is empty after (below)
    # chat --schema (issue 28): the stand-in fills each string with the question's first line
    """cat ticket.txt | localgpt chat --schema 'title, severity int, tags: short labels' "triage this" | jq -r .title""":  # noqa: E501
        "The build server's disk is full\\.\n",
    """localgpt chat --schema-multi 'name, role' -f minutes.txt "who attended?" | jq -r '.[] | [.name, .role] | @tsv'""":  # noqa: E501
        "who attended\\?\twho attended\\?\n",
    """localgpt chat --json --schema 'title' "name this ticket" < ticket.txt | jq -c 'select(.type=="done") | .payload.structured // empty'""":  # noqa: E501
        re.escape('{"title":"The build server\'s disk is full."}\n'),
    """printf 'disk full on build01\\nVPN drops hourly\\n' | localgpt chat --schema 'label' --each "classify" | jq -r 'select(.type=="structured") | [.input_id, .value.label] | @tsv'""":  # noqa: E501
        "1\tdisk full on build01\n2\tVPN drops hourly\n",
    """cat ticket.txt | localgpt chat -t triage | jq -r .title""":
        "Triage: The build server's disk is full\\.\n",
    """localgpt chat --schema-multi 'name, role' -f minutes.txt "who attended?" | jq -r '.[].name'""":  # noqa: E501
        "who attended\\?\n",
    """localgpt chat --schema label --each classify < titles.txt | jq -r 'select(.value).value.label'""":  # noqa: E501
        "Printer jams on floor 2\nVPN drops hourly\n",
    """localgpt schema --json 'title' | jq -c .properties""":
        re.escape('{"title":{"type":"string"}}\n'),
}


# The recipes whose records come from the server: with it down, they must print no `null`.
NEEDS_SERVER = ("localgpt models", "localgpt search", "printf", "localgpt chat", "localgpt eval")


def prepare(work: Path, standin, run) -> dict[str, str]:
    """The folder the recipes run in: two collections (one file that fails), two facts,
    three conversations (the last with an edit preview), eval's files; returns what the
    recipes' placeholder ids stand for."""
    (work / "notes").mkdir()
    (work / "notes" / "vpn.md").write_text(VPN)
    (work / "notes" / "backup.md").write_text("# Backups\n\nBackups run nightly with restic.\n")
    (work / "papers").mkdir()
    (work / "papers" / "attention.md").write_text("# Attention\n\nSmith (2017) on attention.\n")
    (work / "papers" / "broken.pdf").write_bytes(b"%PDF-1.4 broken")
    (work / "q.jsonl").write_text('{"id": "q1", "text": "how do I reset the VPN?"}\n')
    (work / "q.tsv").write_text("q1\tvpn\t1\n")
    (work / "ticket.txt").write_text("The build server's disk is full.\nBuilds fail since 9:00.\n")
    (work / "minutes.txt").write_text("Ann chaired; Bo took the notes.\n")
    (work / "titles.txt").write_text("Printer jams on floor 2\nVPN drops hourly\n")
    triage = ("localgpt", "chat", "--save", "triage", "-s", "You triage tickets.", "--schema",
              "title, severity int", "Triage: $input")  # as README's For scripts saves it
    assert run(*triage).returncode == 0
    assert run("localgpt", "ingest", "notes").returncode == 0
    assert run("localgpt", "ingest", "-C", "papers", "papers").returncode == 5  # broken.pdf
    assert run("localgpt", "memory", "add", "we deploy with Ansible").returncode == 0
    papers_fact = ("localgpt", "memory", "add", "-C", "papers", "cite by author and year")
    assert run(*papers_fact).returncode == 0
    assert run("localgpt", "chat", "--no-rag", "how do I use docker compose?").returncode == 0
    assert run("localgpt", "chat", "--no-rag", "what does -ENOSPC mean?").returncode == 0
    diff = VPN.replace("vpn-rotate.", "vpn-rotate --all.")
    patch = ("--- a/notes/vpn.md\n+++ b/notes/vpn.md\n@@ -1,3 +1,3 @@\n # VPN setup\n \n"
             f"-{VPN.splitlines()[2]}\n+{diff.splitlines()[2]}\n")
    standin.script(Reply(tool_calls=[{"name": "propose_edit", "arguments": {
        "path": "notes/vpn.md", "diff": patch, "explanation": "all keys"}}], offered_only=True),
        Reply(content="Shown above."))
    assert run("localgpt", "chat", "--no-rag", "rotate all the keys").returncode == 0
    preview = json.loads(run("localgpt", "history", "last-preview", "--json").stdout)
    return {"3f9a1c2e": preview["id"]}


def bash(recipe: str, work: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-o", "pipefail", "-c", recipe], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)


def localgpt_on_path(folder: Path) -> str:
    """A `localgpt` on PATH that runs this checkout (as `pip install -e .` would)."""
    folder.mkdir()
    script = folder / "localgpt"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} -m localgpt_cli "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


@pytest.mark.timeout(900)  # ~40 processes on a loaded machine
def test_every_jq_recipe_runs_as_written(standin, isolated_env, tmp_path):
    if JQ is None:
        unavailable("jq is not installed (apt-get install jq)")
    recipes = list(dict.fromkeys([*readme_recipes(), *help_recipes()]))
    assert len(recipes) > 20  # the recipes were found
    assert sorted(set(recipes) - set(EXPECTED)) == [], "a recipe without an expected text"
    assert sorted(set(EXPECTED) - set(recipes)) == [], "an expected text without its recipe"
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATH": localgpt_on_path(tmp_path / "bin")}
    placeholders = prepare(work, standin, lambda *args: bash(shlex.join(args), work, env))
    failures = []
    for recipe, expected in EXPECTED.items():
        command = recipe
        for name, value in placeholders.items():
            command = command.replace(name, value)
        p = bash(command, work, env)
        expected = expected.replace("WORK", re.escape(str(work))).replace("ULID", ULID)
        if p.returncode != 0 or not re.fullmatch(expected, p.stdout):
            failures.append(f"{recipe}\n  exit {p.returncode}, stdout {p.stdout!r}\n"
                            f"  stderr {p.stderr[-400:]!r}")
    assert not failures, "\n".join(failures)
    assert bash("localgpt docs list --json", work, env).stdout == ""  # docs rm ran
    down = {**env, "OLLAMA_HOST": f"http://127.0.0.1:{_closed_port()}"}
    for recipe in [r for r in EXPECTED if r.startswith(NEEDS_SERVER)]:
        p = bash(recipe, work, down)
        assert "null" not in p.stdout.splitlines(), (recipe, p.stdout)
