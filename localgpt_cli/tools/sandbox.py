"""The sandbox of the file tools: the allowed roots, and the one place that turns a model's
path into a real one.

A model can be talked into asking for `~/.ssh/id_rsa` by any document it reads, so the
sandbox decides on the *resolved* path: `..` and symlinks are resolved first, then the
result must lie inside one of the allowed roots, outside the system trees, and pass the
secrets rules (tools/denylist.py). What a file tool returns goes through `redacted`, so a
secret inside an allowed file reaches the model only as `[redacted: KIND]` (redact.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from localgpt_cli import redact as secrets
from localgpt_cli.tools.base import ToolError
from localgpt_cli.tools.denylist import HEAD_BYTES, DenyList, inside

SYSTEM_TREES = ("/proc", "/sys", "/dev")
Warn = Callable[[str, str], None]
SECRET_MARGIN = 8192  # looked at around a page for a secret it cuts (a PEM key is < 7 KB)


class Sandbox:
    """Allowed roots, and the one place that turns a model's path into a real one."""

    def __init__(
        self,
        roots: Sequence[Path | str],
        base: Path | str | None = None,
        deny: DenyList | None = None,
        warn: Warn | None = None,
    ):
        self.base = Path(base) if base is not None else Path.cwd()
        self.deny = deny if deny is not None else DenyList()
        self.warn = warn
        resolved: list[Path] = []
        for root in roots:
            real = Path(os.path.realpath(Path(root).expanduser()))
            if real not in resolved:
                resolved.append(real)
        self.roots = tuple(resolved)
        self._root_texts = tuple(str(r) for r in resolved)

    def roots_text(self) -> str:
        return ", ".join(str(r) for r in self.roots) or (
            "none (the current folder is $HOME or /: name one with --allow-folder PATH or "
            "[tools.files] folders)")

    def refuse(self, path: str, why: str) -> ToolError:
        return ToolError(f"refused: {path} {why}; allowed folders: {self.roots_text()}")

    def resolve(self, path: str) -> Path:
        """The real path behind `path`, or a ToolError if it leaves the sandbox."""
        if not path.strip():
            raise ToolError("the path is empty")
        if "\x00" in path:
            raise self.refuse(repr(path), "contains a NUL byte")
        text = os.path.realpath(os.path.join(self.base, os.path.expanduser(path)))
        if any(inside(text, tree) for tree in SYSTEM_TREES):
            raise self.refuse(path, "is in a system folder (/proc, /sys, /dev)")
        if not any(inside(text, root) for root in self._root_texts):
            raise self.refuse(path, "is outside the allowed folders")
        real = Path(text)
        rule = self.deny.rule_for(real)
        if rule is not None:
            raise self.denied(path, rule)
        return real

    def denied(self, path: str, rule: str) -> ToolError:
        """The refusal of a secret: the rule is named, nothing of the content."""
        return ToolError(
            f"refused: {path} is withheld by the secrets rule {rule}; the file tools never "
            "read credentials (the user may name the path in tools.files.allow)"
        )

    def check_head(self, real: Path, path: str, head: bytes) -> None:
        """Refuse a file whose first bytes are a private key's header."""
        rule = self.deny.rule_for_head(real, head)
        if rule is not None:
            raise self.denied(path, rule)

    def redacted(self, text: str, path: str) -> str:
        """`text` with what looks like a secret replaced, and a warning naming the lines."""
        return self.redacted_part(text, 0, len(text), path)

    def redacted_part(
        self, text: str, start: int, stop: int, path: str, lines_before: int = 0
    ) -> str:
        """`text[start:stop]` redacted (secrets.redact_part), warning as `redacted` does;
        `lines_before`: lines of the file before `text` (a window of it), so the warning
        names the file's line."""
        clean, found = secrets.redact_part(text, start, stop, SECRET_MARGIN)
        if found and self.warn is not None:
            found = [secrets.Finding(f.kind, f.line + lines_before) for f in found]
            self.warn("secret_redacted", f"{path}: redacted {secrets.summary(found)} "
                      "before the model saw it")
        return clean

    def starts_like_a_key(self, real: Path) -> bool:
        """Whether list_directory leaves out the regular file `real` for how it starts
        (its name was checked by `resolve`'s rules already). O_NONBLOCK: a FIFO swapped
        in meanwhile does not hang the listing."""
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
        try:
            fd = os.open(real, flags)
        except OSError:
            return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            return self.deny.rule_for_head(real, os.pread(fd, HEAD_BYTES, 0)) is not None
        except OSError:
            return False
        finally:
            os.close(fd)
