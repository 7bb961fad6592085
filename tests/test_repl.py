"""The interactive chat on a real terminal: answers, /new, Ctrl-C stops only the answer."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import sys
import time

from localgpt_cli.history.sqlite import SQLiteStore
from tests.cli import ROOT
from tests.standin import Reply


class Terminal:
    """`localgpt ARGS` on a pseudo-terminal that a test types into."""

    def __init__(self, *args: str, cwd: str | os.PathLike[str] = ROOT) -> None:
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "NO_COLOR": "1",
               "PYTHONPATH": str(ROOT)}
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # child
            os.chdir(cwd)
            os.execve(sys.executable, [sys.executable, "-m", "localgpt_cli", *args], env)
        self.screen = b""
        self.pos = 0  # what the test has already seen

    def read_until(self, marker: bytes, timeout: float = 20) -> bytes:
        """Wait for `marker` after what was already matched; move past it."""
        deadline = time.monotonic() + timeout
        while self.screen.find(marker, self.pos) < 0 and time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if ready:
                try:
                    self.screen += os.read(self.fd, 65536)
                except OSError:
                    break
        at = self.screen.find(marker, self.pos)
        assert at >= 0, (marker, self.screen[-2000:])
        seen, self.pos = self.screen[self.pos : at + len(marker)], at + len(marker)
        return seen

    def type(self, text: bytes) -> None:
        os.write(self.fd, text)

    def wait(self, timeout: float = 20) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            select.select([self.fd], [], [], 0.1)
            with contextlib.suppress(OSError):
                self.screen += os.read(self.fd, 65536)
        raise AssertionError("the REPL did not exit")


def test_repl_answers_keeps_one_conversation_and_survives_ctrl_c(standin, isolated_env):
    standin.script(
        Reply(content="First answer."),
        Reply(content="Second answer."),
        Reply(content=["slow "] * 400, delay=0.05),
        Reply(content="After the stop."),
    )
    term = Terminal("chat")
    term.read_until(b">>>")
    term.type(b"hello\r")
    term.read_until(b"First answer.")
    term.read_until(b">>>")
    term.type(b"and again\r")
    term.read_until(b"Second answer.")
    term.read_until(b">>>")
    term.type(b"/new\r")
    term.read_until(b"New conversation.")
    term.type(b"tell me a long story\r")
    term.read_until(b"slow")
    term.type(b"\x03")  # Ctrl-C while the answer streams
    term.read_until(b">>>")  # the REPL is still there
    term.type(b"still here?\r")
    term.read_until(b"After the stop.")
    term.read_until(b">>>")
    term.type(b"/exit\r")
    assert term.wait() == 0

    requests = standin.chat_requests()
    assert [m["content"] for m in requests[1]["messages"]] == [
        "hello", "First answer.", "and again"]
    assert [m["content"] for m in requests[2]["messages"]] == ["tell me a long story"]
    assert requests[3]["messages"][-1]["content"] == "still here?"
    assert requests[3]["messages"][0]["content"] == "tell me a long story"
    with SQLiteStore.open(os.path.join(os.environ["LOCALGPT_HOME"], "history.db")) as store:
        conversations = store.list_conversations()
        assert sorted(c.messages for c in conversations) == [4, 4]
        newest = store.messages(conversations[0].id)
    assert newest[1].metadata["done_reason"] == "aborted"
    assert newest[1].content.startswith("slow ")


def test_ctrl_d_at_the_prompt_quits(standin):
    term = Terminal("chat")
    term.read_until(b">>>")
    term.type(b"\x04")
    assert term.wait() == 0


def test_model_shows_and_switches_the_provider_and_model_of_the_next_answers(
    standin, isolated_env
):
    """/model prints provider:model; /model PROFILE:MODEL and /model MODEL switch the next
    turns (same conversation), and each stored answer says who gave it; an unknown profile
    or model is one line and changes nothing."""
    from tests.openai_standin import Answer, OpenAIStandIn

    standin.script(Reply(content="From Ollama."))
    with OpenAIStandIn(models=("some-model", "other-model")) as work:
        work.script(Answer(content="From work."), Answer(content="From the other."))
        config = isolated_env / "config" / "localgpt" / "config.toml"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(f'[providers.work]\nkind = "openai"\nbase_url = "{work.url}"\n')
        term = Terminal("chat")
        term.read_until(b">>>")
        term.type(b"/help\r")
        term.read_until(b"/model [MODEL|PROFILE:MODEL] shows or switches the")
        term.type(b"/model\r")
        term.read_until(b"Model: ollama:llama3.2.")
        term.type(b"one\r")
        term.read_until(b"From Ollama.")
        term.type(b"/model nope:\r")
        term.read_until(b"No provider profile 'nope'; configured: ollama, work.")
        term.type(b"/model work:\r")
        term.read_until(b"'work' has no default_model: name one, /model work:MODEL.")
        term.type(b"/model nope:x\r")
        term.read_until(b"No provider profile 'nope' either; configured: ollama, work.")
        term.type(b"/model work:some-model\r")
        term.read_until(b"Model: work:some-model (from the next question on).")
        term.type(b"two\r")
        term.read_until(b"From work.")
        term.type(b"/model missing-model\r")  # on work now: it does not offer that one
        term.read_until(b"'missing-model' is not offered")
        term.type(b"/model\r")
        term.read_until(b"Model: work:some-model.")
        term.type(b"/model other-model\r")
        term.read_until(b"Model: work:other-model")
        term.type(b"three\r")
        term.read_until(b"From the other.")
        term.read_until(b">>>")
        term.type(b"/exit\r")
        assert term.wait() == 0
        bodies = [q["body"] for q in work.requests if q["path"] == "/v1/chat/completions"]
    assert [b["model"] for b in bodies] == ["some-model", "other-model"]
    # the conversation goes on across the switch: work was sent the Ollama turn too
    assert [m["content"] for m in bodies[0]["messages"] if m["role"] != "system"] == [
        "one", "From Ollama.", "two"]
    assert len(standin.chat_requests()) == 1
    with SQLiteStore.open(os.path.join(os.environ["LOCALGPT_HOME"], "history.db")) as store:
        (conversation,) = store.list_conversations()
        answers = [m for m in store.messages(conversation.id) if m.role == "assistant"]
    assert [(m.metadata["provider"], m.metadata["model"]) for m in answers] == [
        ("ollama", "llama3.2"), ("work", "some-model"), ("work", "other-model")]
