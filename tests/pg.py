"""A real PostgreSQL server for the history tests: initdb + pg_ctl in a temporary folder.

Debian's `postgresql` package puts its programs in /usr/lib/postgresql/VERSION/bin (not
on PATH); .ci/run installs it when absent. The server refuses to run as root, so as
root (CI) it runs as the `postgres` user the package creates, in a folder made its own.
It listens on a free loopback port with password (SCRAM) authentication, so a test can
also be refused; fsync is off because nothing here must survive a power cut.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "postgres"
PASSWORD = "localgpt-test-secret"


def binaries() -> Path | None:
    """The folder holding initdb and pg_ctl (the newest installed version), if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parent.parent.name))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path and shutil.which("pg_ctl") else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """One running server; `url(db)` names a database on it."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="localgpt-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            shutil.chown(self.root, USER)
        os.chmod(self.root, 0o700)

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self.as_root:
            command = ["runuser", "-u", USER, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=120,
                              cwd=self.root, check=False)

    def start(self) -> Server:
        pwfile = self.root / "pw"
        pwfile.write_text(PASSWORD + "\n")
        if self.as_root:
            shutil.chown(pwfile, USER)
        for step in (
            ("initdb", "-D", str(self.data), "-U", USER, "--auth=scram-sha-256",
             f"--pwfile={pwfile}", "--encoding=UTF8", "--locale=C"),
            ("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60",
             "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
             " -c fsync=off -c synchronous_commit=off -c full_page_writes=off", "start"),
        ):
            done = self._run(*step)
            if done.returncode != 0:
                log = (self.root / "log").read_text() if (self.root / "log").exists() else ""
                raise RuntimeError(f"{step[0]} failed: {done.stdout}{done.stderr}{log}")
        return self

    def url(self, database: str = "postgres", password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(sql)

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
