"""The files the file tools never read, whatever folder they sit in.

The sandbox keeps a model inside the allowed folders, but a shell user's folder is often
`$HOME`, and a model can be talked into asking for `~/.ssh/id_rsa` by any document it
reads. So the credentials every developer machine holds are refused by name, on the
*resolved* path (after `..` and symlinks), and a file that starts like a private key is
refused by its first bytes whatever it is called. A refusal names the rule, never the
content. `tools.files.deny` adds glob patterns; a built-in rule is lifted only for a path
the user names in `tools.files.allow` (a file, or a folder and what is inside it).
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

# Folders under $HOME that hold nothing but credentials.
HOME_FOLDERS = (".ssh", ".gnupg", ".aws", ".azure", ".config/gcloud", ".kube")
# Single files under $HOME that hold passwords or tokens.
HOME_FILES = (".docker/config.json", ".netrc", ".pgpass", ".git-credentials")
# Names refused wherever they are: environment files, keys and certificates with keys.
NAME_PATTERNS = (".env", ".env.*", "*.pem", "*.key", "*.p12")
# Each name pattern as one compiled expression, tried in order (fnmatch per call
# looked the pattern up each time: the deny list is checked on every file a tool opens).
_NAME_RULES = tuple((re.compile(fnmatch.translate(p)), p) for p in NAME_PATTERNS)
# The header of any PEM private key (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP's block).
PRIVATE_KEY_HEADER = re.compile(
    rb"(?:\xef\xbb\xbf)?\s*-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
)
HEAD_BYTES = 1024  # what is read of a file to look at how it starts
# Files looked at, at most, to learn which credentials have hard links (~/.kube's cache
# can hold thousands; the credentials themselves sit at the top of their folders).
LINK_WALK_LIMIT = 5000


def _real(path: str | Path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def inside(path: str, root: str) -> bool:
    """Whether the absolute, normalized `path` is `root` or lies under it. On strings: a
    file tool checks every path it is given against several roots and rules, and pathlib's
    `is_relative_to` made that check cost more than the read itself."""
    if path == root:
        return True
    prefix = root if root.endswith("/") else root + "/"
    return path.startswith(prefix)


def _folded(path: str) -> str:
    """`path` in small letters: the rules hold whatever the case (`ID_RSA`, `.ENV`), and on
    a case-insensitive disk (macOS's default) `~/.SSH/id_rsa` is the key itself."""
    return path.casefold()


class DenyList:
    """The built-in rules over `home`, the user's `deny` patterns and `allow` paths.

    `own` are localgpt's own files (its config and history), refused like credentials:
    the history may hold every earlier conversation, the config a database URL.
    """

    def __init__(
        self,
        home: str | Path | None = None,
        own: Sequence[str | Path] = (),
        deny: Sequence[str] = (),
        allow: Sequence[str | Path] = (),
    ) -> None:
        self.home = _real(home if home is not None else Path.home())
        self.own = tuple(_real(p) for p in own)
        self.deny = tuple(os.path.expanduser(p) for p in deny)
        self.allow = tuple(_real(p) for p in allow)
        home_folded = _folded(str(self.home))
        self._folders = tuple((os.path.join(home_folded, f), f) for f in HOME_FOLDERS)
        self._files = {os.path.join(home_folded, f): f for f in HOME_FILES}
        self._allowed = tuple(str(p) for p in self.allow)
        self._linked: dict[tuple[int, int], str] | None = None

    def rule_for(self, real: Path) -> str | None:
        """The rule that refuses the resolved path `real`, or None."""
        for pattern in self.deny:
            if _denied_by_pattern(real, pattern):
                return f"tools.files.deny {pattern!r}"
        if any(inside(str(real), allowed) for allowed in self._allowed):
            return None
        return self._builtin(real) or self._hard_link(real)

    def _builtin(self, real: Path) -> str | None:
        text = str(real)
        folded = _folded(text)
        for path, folder in self._folders:
            if inside(folded, path):
                return f"~/{folder} (credentials)"
        name = self._files.get(folded)
        if name is not None:
            return f"~/{name} (credentials)"
        for own in self.own:  # history.db, and its -wal, -shm and -journal beside it
            own_text = str(own)
            if text == own_text or (text.startswith(own_text + "-")
                                     and "/" not in text[len(own_text):]):
                return f"localgpt's own {own.name}"
        base = os.path.basename(folded)
        for rule, pattern in _NAME_RULES:
            if rule.match(base):
                return f"{pattern} (keys and environment files)"
        if base.startswith("id_") and not base.endswith(".pub"):
            return "id_* without .pub (SSH private keys)"
        return None

    def _hard_link(self, real: Path) -> str | None:
        """The rule of the credential that `real` is another name of: a hard link has a
        path of its own, so `realpath` does not lead to the credential's rule."""
        try:
            info = os.stat(real)
        except OSError:
            return None
        if not stat.S_ISREG(info.st_mode) or info.st_nlink < 2:
            return None  # one name only: the rules above judged it
        if self._linked is None:
            self._linked = self._linked_credentials()
        rule = self._linked.get((info.st_dev, info.st_ino))
        return f"a hard link to {rule}" if rule else None

    def _linked_credentials(self) -> dict[tuple[int, int], str]:
        """(device, inode) -> rule of every credential file that has more than one name."""
        found: dict[tuple[int, int], str] = {}
        files = [(self.home / name, f"~/{name} (credentials)") for name in HOME_FILES]
        files += [(own, f"localgpt's own {own.name}") for own in self.own]
        for folder in HOME_FOLDERS:
            for top, _dirs, names in os.walk(self.home / folder):
                files += [(Path(top, n), f"~/{folder} (credentials)") for n in names]
                if len(files) > LINK_WALK_LIMIT:
                    break
        for path, rule in files[:LINK_WALK_LIMIT]:
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                found[(info.st_dev, info.st_ino)] = rule
        return found

    def rule_for_head(self, real: Path, head: bytes) -> str | None:
        """The rule that refuses a file starting with `head` (its first bytes), or None."""
        if any(inside(str(real), allowed) for allowed in self._allowed):
            return None
        if PRIVATE_KEY_HEADER.match(head[:HEAD_BYTES]):
            return "a private-key header (-----BEGIN … PRIVATE KEY-----)"
        return None


def _denied_by_pattern(real: Path, pattern: str) -> bool:
    """A pattern with a `/` matches the full path or a folder above it; one without
    matches a file or folder name anywhere on the path."""
    if "/" not in pattern:
        return any(fnmatch.fnmatchcase(part, pattern) for part in real.parts)
    return any(fnmatch.fnmatchcase(str(p), pattern) for p in (real, *real.parents))
