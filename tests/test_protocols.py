"""The kernel is written against the Provider and Store protocols, not their implementations.

So a second model provider or history backend is a new module, and the kernel does not
pull in the Ollama client or the SQLite store (nor the history package for ids) to run.
"""

from __future__ import annotations

import subprocess
import sys

from tests.cli import ROOT


def test_the_kernel_loads_no_provider_or_store_implementation():
    code = "import sys, localgpt_cli.kernel.session; print(' '.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=60, check=True)
    loaded = set(result.stdout.split())
    assert "localgpt_cli.llm.provider" in loaded
    assert not loaded & {"localgpt_cli.llm.ollama", "ollama", "httpx"}
    assert not {m for m in loaded if m.startswith("localgpt_cli.history")}
