"""`localgpt ARGS` in a real terminal emulator (tmux) that a test types and pastes into.

tmux is a terminal as people use one: it answers the REPL's queries, wraps a paste in
bracketed-paste markers only when the program asked for them (`paste-buffer -p`), and
otherwise turns the pasted newlines into Enter presses, as a terminal without bracketed
paste does. Each test gets its own tmux server (a socket under tmp_path), started with the
test's environment (OLLAMA_HOST pointing at the stand-in, the isolated folders).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.cli import ROOT
from tests.requires import unavailable


class Tmux:
    """One pane running `python -m localgpt_cli ARGS` (or `argv`, a program of a
    benchmark's); its exit code lands in a file."""

    def __init__(self, tmp: Path, *args: str, cwd: str | os.PathLike[str] = ROOT,
                 argv: list[str] | None = None) -> None:
        if shutil.which("tmux") is None:
            unavailable("tmux is not installed (apt-get install tmux)")
        self.socket = tmp / "tmux.sock"
        self.status = tmp / "tmux.exit"
        self.status.unlink(missing_ok=True)
        argv = argv or [sys.executable, "-m", "localgpt_cli", *args]
        command = " ".join(shlex.quote(a) for a in argv)
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        env.update(NO_COLOR="1", PYTHONPATH=str(ROOT))
        self._tmux("new-session", "-d", "-x", "100", "-y", "40", "-c", str(cwd),
                   f"{command}; echo $? > {shlex.quote(str(self.status))}", env=env)

    def _tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        out = subprocess.run(["tmux", "-S", str(self.socket), *args], capture_output=True,
                             text=True, timeout=30, env=env)
        assert out.returncode == 0, (args, out.stderr)
        return out.stdout

    def screen(self) -> str:
        """The pane and its scrollback, wrapped lines joined."""
        if self.status.exists():
            return ""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-")

    def wait_for(self, text: str, count: int = 1, timeout: float = 30) -> str:
        """Wait until `text` shows `count` times on the screen; return the screen."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} (x{count}) not on the screen:\n{self.screen()[-3000:]}")

    def at_prompt(self, prompt: str = ">>>", timeout: float = 30) -> None:
        """Wait until the last line on the screen is an empty prompt: the answer is over
        and the editor reads keys again (a Ctrl-D typed while an answer streams goes to
        the terminal's line discipline, which drops it when the editor takes over)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            lines = [line for line in self.screen().splitlines() if line.strip()]
            if lines and lines[-1].strip() == prompt:
                return
            time.sleep(0.2)
        raise AssertionError(f"no empty {prompt!r} prompt:\n{self.screen()[-3000:]}")

    def quit(self) -> int:
        """Ctrl-D at the next empty prompt; the exit code."""
        self.at_prompt()
        self.keys("C-d")
        return self.wait()

    def keys(self, *keys: str) -> None:
        """tmux key names: `Enter`, `Left`, `C-r`, `Tab`, `Escape`, `C-c`, `C-d`."""
        self._tmux("send-keys", *keys)

    def type(self, text: str) -> None:
        """Characters typed one after the other (no key names)."""
        self._tmux("send-keys", "-l", text)

    def paste(self, text: str) -> None:
        """Paste `text` as a terminal does: bracketed when the program asked for it."""
        clip = self.socket.with_name("tmux.clip")
        clip.write_text(text, encoding="utf-8")
        self._tmux("load-buffer", "-b", "paste", str(clip))
        self._tmux("paste-buffer", "-p", "-d", "-b", "paste")

    def wait(self, timeout: float = 30) -> int:
        """The exit code of localgpt, once it has ended (the server is then stopped)."""
        deadline = time.monotonic() + timeout
        while not self.status.exists() or not self.status.read_text().strip():
            if time.monotonic() > deadline:
                self.close()
                raise AssertionError("localgpt did not exit")
            time.sleep(0.1)
        self.close()
        return int(self.status.read_text())

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True,
                       timeout=30)
