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


# fsync off: nothing here must survive a power cut. synchronous_commit off is faster still
# but a commit may then sit in the server's memory: the fault tests, which kill servers
# and count what was kept, start theirs with DURABLE instead.
FAST = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
DURABLE = "-c fsync=off -c full_page_writes=off"


class Server:
    """One running server; `url(db)` names a database on it. As a fault-harness component
    (tests/faults.py): `pids()` is the postmaster and its children, `start()` (re)starts
    it on the same folder and port."""

    def __init__(self, bin_dir: Path, settings: str = FAST) -> None:
        self.settings = settings
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
        steps = [
            ("initdb", "-D", str(self.data), "-U", USER, "--auth=scram-sha-256",
             f"--pwfile={pwfile}", "--encoding=UTF8", "--locale=C"),
            ("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60",
             "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
             f" {self.settings}", "start"),
        ]
        if (self.data / "PG_VERSION").exists():  # a restart: the cluster is there
            steps.pop(0)
        for step in steps:
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

    def postmaster(self) -> int | None:
        """The postmaster's pid (the first line of DATA/postmaster.pid), if it runs."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid

    def pids(self) -> list[int]:
        from tests.faults import children

        main = self.postmaster()
        return [] if main is None else [main, *children(main)]

    def backends(self, database: str) -> list[int]:
        """The pids serving localgpt's connections to `database`."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            return [pid for (pid,) in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s"
                " AND application_name = 'localgpt'", (database,))]

    def restart(self) -> None:
        """A clean restart (`pg_ctl restart -m fast`): every connection is cut, nothing
        committed is lost."""
        done = self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"),
                         "-m", "fast", "-w", "-t", "60", "restart")
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl restart failed: {done.stdout}{done.stderr}")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)
