"""Where the in-process embedder's memory goes: loading its weights, and embedding a batch.

    python -m tests.bench.local_memory

Each figure comes from a fresh process (peak RSS from /proc/self/status's VmHWM, which
counts mapped file pages too), after LanceDB is imported and glibc's mmap threshold is
pinned as `ingest` does, so the baseline is an ingest's:

- load: the peak above the baseline while all-MiniLM-L6-v2's weights are read, by
  llm/bert.py's reader and, when the `safetensors` library is installed, through its
  memory-mapped `safe_open` (what the embedder used before), and what stays after;
- embed: the peak above the loaded model while 64 texts of 800 characters (two batches of
  32 x 256 tokens, one per core) are embedded, and what stays after.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

from tests.bench.common import ROOT

MODEL = "local:all-minilm-l6-v2"

_CHILD = """
import json, sys
def mb():
    d = {}
    for line in open("/proc/self/status"):
        k, v = line.split(":", 1)
        if k in ("VmRSS", "VmHWM"):
            d[k] = int(v.split()[0]) // 1024
    return d["VmRSS"], d["VmHWM"]
from localgpt_cli.heap import pin_mmap_threshold
pin_mmap_threshold()
import lancedb  # noqa: F401  (an ingest's baseline)
from localgpt_cli.llm import bert
from localgpt_cli.llm.local import LocalEmbedder, model_dir
case = sys.argv[1]
directory = model_dir("local:all-minilm-l6-v2")
layers = bert.BertConfig.read(directory).layers
base, _ = mb()
if case == "embed":
    e = LocalEmbedder()
    e.embed_array("local:all-minilm-l6-v2", ["warm up"])
    from tests.bench.local_embedder import prose
    texts = prose(64, 800)
    base, _ = mb()
    # VmHWM cannot be reset: the loaded model's peak is below this one's, as the figures
    # show, so the peak below is the embedding's
    e.embed("local:all-minilm-l6-v2", texts)
elif case == "safetensors":
    from safetensors import safe_open
    with safe_open(str(directory / "model.safetensors"), framework="numpy") as fh:
        names = {k.removeprefix("bert."): k for k in fh.keys()}
        w = bert._arrange(lambda n: fh.get_tensor(names[n]), layers)
else:
    w = bert.load_weights(directory / "model.safetensors", layers)
rss, hwm = mb()
print(json.dumps({"peak_above_mb": hwm - base, "kept_mb": rss - base}))
"""


def measure(case: str) -> dict[str, int]:
    p = subprocess.run([sys.executable, "-c", _CHILD, case], capture_output=True, text=True,
                       cwd=ROOT, check=True)  # fmt: skip
    return dict(json.loads(p.stdout))


def main() -> None:
    cases = ["load", "embed"]
    if importlib.util.find_spec("safetensors") is not None:
        cases.insert(1, "safetensors")
    for case in cases:
        print(json.dumps({"case": case, **measure(case)}), flush=True)


if __name__ == "__main__":
    main()
