"""Secrets in text the model is about to see: found, replaced by `[redacted: KIND]`.

Whatever a tool reads (a file, a retrieved passage, piped stdin) goes to the model, to
stdout and into the history, which may be a shared PostgreSQL. A private key, an AWS key
pair, a bearer token or a password assignment in that text is replaced before any of them
sees it, and the caller warns on stderr with the line, never the value.

The patterns are the few that matter here, written after detect-secrets' plugins
(PrivateKeyDetector, AWSKeyDetector, the bearer and keyword detectors) rather than
running them: detect-secrets scans line by line through every plugin and measured 50 to
5,000 times slower per MB (tests/bench/redaction.py), and a file read must cost no more
than before. A cheap search for literal pieces decides first whether any pattern can
match at all, so an ordinary file pays a few fast scans.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_KEYWORDS = r"pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|auth[_-]?key"
PATTERN = re.compile(
    r"(?P<private_key>-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----"
    r"[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|\Z))"
    r"|(?P<aws_access_key_id>(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}(?![0-9A-Za-z]))"
    r"|(?P<url_password>://[^/\s:@'\"]{1,64}:)(?P<url_value>[^/\s@'\"]{1,128})(?=@)"
    r"|(?i:(?P<bearer>bearer[ \t]+)(?P<bearer_value>[A-Za-z0-9\-._~+/]{12,}=*))"
    r"|(?i:(?P<assign>(?P<keyword>" + _KEYWORDS + r")[\w.-]*[\"']?[ \t]*(?::=|=>|[=:])[ \t]*)"
    r"(?P<value>\"[^\"\n]{4,}\"|'[^'\n]{4,}'|[^\s\"',;()\[\]{}]{4,}))"
)
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
# Literal pieces one of which every match contains, each searched alone (a literal
# pattern is the fastest scan `re` has; an alternation of them is 30x slower, and `in`
# measured 1.5x slower): when none is present the text is returned without the regex.
_CASED_HINT = re.compile(r"A(?:KIA|SIA|BIA|CCA)")
_LOWER_HINTS = tuple(re.compile(re.escape(hint)) for hint in (
    "key", "pass", "pwd", "secret", "token", "bearer", "://"))  # "key": PRIVATE KEY too
_NOT_VALUES = ("none", "null", "nil", "true", "false", "undefined", "str", "string", "bytes",
               "optional", "required")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_LABELS = {"pass": "password", "pwd": "password", "secret": "secret", "token": "token"}


@dataclass(frozen=True)
class Finding:
    """One secret replaced: its kind and the line it started on (1-based)."""

    kind: str
    line: int


def _may_hold_secret(text: str) -> bool:
    if _CASED_HINT.search(text):
        return True
    lower = text.lower()
    return any(hint.search(lower) for hint in _LOWER_HINTS)


def _label(match: re.Match[str]) -> str:
    """The kind a keyword assignment is reported as: `aws_secret_access_key`, `password`…"""
    name = (_name_before(match) + match.group("assign")).lower()
    if "aws" in name and "secret" in name:
        return "aws_secret_access_key"
    keyword = match.group("keyword").lower()
    for prefix, label in _LABELS.items():
        if keyword.startswith(prefix):
            return label
    return "api_key"


def _replacement(match: re.Match[str]) -> tuple[str, str]:
    """(kind, the text that replaces the match): names are kept, values go. A kind of ""
    means the match is not a secret after all (a call, an attribute, already redacted)."""
    if match.group("private_key"):
        return "private_key", "[redacted: private_key]"
    if match.group("aws_access_key_id"):
        return "aws_access_key_id", "[redacted: aws_access_key_id]"
    if match.group("url_password"):
        return "password", f"{match.group('url_password')}[redacted: password]"
    if match.group("bearer"):
        return "bearer_token", f"{match.group('bearer')}[redacted: bearer_token]"
    value = match.group("value")
    if value.strip("\"'").startswith("[redacted") or _is_code(match, value):
        return "", match.group(0)
    kind = _label(match)
    return kind, f"{match.group('assign')}[redacted: {kind}]"


def _is_code(match: re.Match[str], value: str) -> bool:
    """`key = os.environ.get(...)`, `password: str`: an unquoted name, not a value."""
    if value[0] in "\"'":
        return False
    if match.string[match.end() : match.end() + 1] == "(" or value.lower() in _NOT_VALUES:
        return True
    return bool(_DOTTED.fullmatch(value))


def _name_before(match: re.Match[str]) -> str:
    """The start of the name the keyword is part of (`AWS_` of `AWS_SECRET…`): the
    pattern starts at the keyword, which is much faster than at every name."""
    text, at = match.string, match.start()
    begin = at
    while begin > 0 and text[begin - 1] in _NAME_CHARS and at - begin < 64:
        begin -= 1
    return text[begin:at]


@dataclass(frozen=True)
class Span:
    """One secret in a text: where it is, what it is, what replaces it."""

    start: int
    end: int
    kind: str
    replacement: str


def spans(text: str, start: int = 0, stop: int | None = None) -> list[Span]:
    """The secrets in `text[start:stop]`."""
    stop = len(text) if stop is None else stop
    if start >= stop or not _may_hold_secret(text[start:stop]):
        return []
    out = []
    for match in PATTERN.finditer(text, start, stop):
        kind, new = _replacement(match)
        if kind:
            out.append(Span(match.start(), match.end(), kind, new))
    return out


def redact(text: str) -> tuple[str, list[Finding]]:
    """`text` with each secret replaced, and what was replaced where."""
    return redact_part(text, 0, len(text))


def redact_part(
    text: str, start: int, stop: int, margin: int = 0
) -> tuple[str, list[Finding]]:
    """`text[start:stop]` with each secret replaced, looking `margin` characters (then to
    the line's end) either side, so a secret cut by the window is still found: a page of
    a long file is scanned, not the whole file. A secret begun before `start` shows as
    its bare marker."""
    low = text.rfind("\n", 0, max(0, start - margin)) + 1
    high = text.find("\n", min(len(text), stop + margin))
    found = spans(text, low, len(text) if high == -1 else high)
    parts: list[str] = []
    findings: list[Finding] = []
    at, line, counted = start, 1, 0
    for span in found:
        if span.end <= start or span.start >= stop:
            continue
        line += text.count("\n", counted, span.start)
        counted = span.start
        findings.append(Finding(span.kind, line))
        parts.append(text[at : max(at, span.start)])
        parts.append(span.replacement if span.start >= start else f"[redacted: {span.kind}]")
        at = max(at, span.end)
    parts.append(text[at:stop] if at < stop else "")
    return "".join(parts), findings


def summary(findings: list[Finding]) -> str:
    """`aws_access_key_id (line 3), password (line 7)`: what a warning names."""
    return ", ".join(f"{f.kind} (line {f.line})" for f in findings)
