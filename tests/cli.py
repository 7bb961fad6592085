"""Helpers to drive the CLI: in process with CliRunner, or as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from localgpt_cli.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "localgpt_cli" / "kernel" / "stream_packet.schema.json").read_text())


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines()]


def invoke(*args: str, input: str | None = None) -> Result:
    """Run `localgpt ARGS` in process through the real entry point (exit-code mapping
    included); CliRunner captures the streams, and its stdin is not a TTY."""
    runner = CliRunner()
    with runner.isolation(input=input or "") as (out, err, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        return Result(code, out.getvalue().decode(), err.getvalue().decode())


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None,
        timeout: float = 60) -> Result:
    """Run `python -m localgpt_cli ARGS` as a real process with the current environment."""
    p = subprocess.run(
        [sys.executable, "-m", "localgpt_cli", *args],
        input=input if input is not None else "",
        capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})}, cwd=ROOT,
    )
    return Result(p.returncode, p.stdout, p.stderr)


def validate_packets(lines: list[dict[str, Any]]) -> None:
    """Every packet matches the shipped schema, ids count from 0, one done, last."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(SCHEMA)
    for packet in lines:
        validator.validate(packet)
    seqs = [int(p["id"].rsplit(":", 1)[1]) for p in lines]
    assert seqs == list(range(len(lines)))
    assert [p["type"] for p in lines].count("done") == 1
    assert lines[-1]["type"] == "done"
