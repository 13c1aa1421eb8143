"""Patterns that users give (crawl URL regexes, SQL LIKE, name globs), matched in linear time by RE2.

Python's `re` backtracks: one nested quantifier such as `(a+)+$` against a long subject runs for minutes
and holds the thread (and, on the event loop, the whole server) that whole time. RE2 (`google-re2`) runs in
time linear in the subject for every pattern, so a user's pattern cannot stall anything; what it cannot run
in linear time (look-around, backreferences, atomic groups, possessive quantifiers) is refused when the
pattern is given, with a 400 naming the pattern and the feature. Subjects are also capped in length
(`MAX_SUBJECT_CHARS`): a longer one does not match.
"""

from __future__ import annotations

import functools
from typing import Protocol

import re2

from agentkb.errors import BadRequest

MAX_PATTERN_CHARS = 1000
MAX_SUBJECT_CHARS = 8192
MAX_PROGRAM_BYTES = 8 << 20  # RE2's memory for one compiled pattern; a pattern needing more is refused

# RE2's parse errors for the constructs a linear-time engine cannot run, by what the user should read
_UNSUPPORTED = (
    ("(?=", "a look-ahead"),
    ("(?!", "a negative look-ahead"),
    ("(?<=", "a look-behind"),
    ("(?<!", "a negative look-behind"),
    ("(?P=", "a backreference"),
    ("(?>", "an atomic group"),
)


class Pattern(Protocol):
    """A compiled RE2 pattern (the parts used here)."""

    def match(self, text: str) -> object | None: ...

    def search(self, text: str) -> object | None: ...

    def fullmatch(self, text: str) -> object | None: ...


def _options(case_sensitive: bool = True) -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a refused user pattern is an answer, not a log line
    options.max_mem = MAX_PROGRAM_BYTES
    options.case_sensitive = case_sensitive
    return options


def _why(pattern: str, message: str) -> str:
    unsupported = "which is not supported: patterns run on a linear-time engine (RE2)"
    for construct, name in _UNSUPPORTED:
        if construct in message or (construct == "(?P=" and construct in pattern and "(?P" in message):
            return f"uses {name}, {unsupported}"
    if "invalid escape sequence: \\" in message and message[-1:].isdigit():
        return f"uses a backreference, {unsupported}"
    if "bad repetition operator: " in message and message.endswith(("++", "*+", "?+", "}+")):
        return f"uses a possessive quantifier, {unsupported}"
    return f"is not a valid regular expression ({message})"


@functools.lru_cache(maxsize=256)
def _compile(pattern: str, case_sensitive: bool) -> Pattern:
    compiled: Pattern = re2.compile(pattern, _options(case_sensitive))
    return compiled


def compile_regex(pattern: object, what: str = "pattern", *, case_sensitive: bool = True) -> Pattern:
    """A user's regular expression compiled by RE2; 400 naming `what`, the pattern and why it is refused."""
    if not isinstance(pattern, str):
        raise BadRequest(f"{what} must be a string (a regular expression)", title="Invalid pattern")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise BadRequest(
            f"{what} {pattern[:40]!r}... is longer than {MAX_PATTERN_CHARS} characters",
            title="Invalid pattern",
        )
    try:
        return _compile(pattern, case_sensitive)
    except re2.error as exc:
        raw = exc.args[0] if exc.args else exc
        message = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        raise BadRequest(f"{what} {pattern!r} {_why(pattern, message)}", title="Invalid pattern") from exc


def matches(pattern: Pattern, text: str, *, anchored: bool = True) -> bool:
    """Whether `text` matches (from its start when `anchored`, as `re.match`; anywhere otherwise). A text
    longer than `MAX_SUBJECT_CHARS` does not match."""
    if len(text) > MAX_SUBJECT_CHARS:
        return False
    return (pattern.match(text) if anchored else pattern.search(text)) is not None


def _escape(text: str) -> str:
    return "".join(c if c.isalnum() and c.isascii() or c == "_" else f"\\x{{{ord(c):x}}}" for c in text)


def like_regex(pattern: str) -> Pattern:
    """SQL LIKE (`%` any run, `_` one character, the rest literal), case-insensitive as MySQL's default
    collation, as a whole-text RE2 pattern."""
    parts = [".*" if c == "%" else "." if c == "_" else _escape(c) for c in pattern]
    return compile_regex("(?s)" + "".join(parts), "LIKE pattern", case_sensitive=False)


def like(value: object, pattern: str) -> bool:
    """SQL LIKE, case-insensitive."""
    text = str(value)
    return len(text) <= MAX_SUBJECT_CHARS and like_regex(pattern).fullmatch(text) is not None


def glob_regex(pattern: str) -> Pattern:
    """A shell glob as `fnmatch` reads it (`*`, `?`, `[seq]`, `[!seq]`), case-insensitive, as RE2."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i + 1 if pattern[i : i + 1] == "!" else i
            j = j + 1 if pattern[j : j + 1] == "]" else j
            end = pattern.find("]", j)
            if end < 0:  # no closing bracket: a literal `[`
                out.append(_escape(c))
                continue
            body, i = pattern[i:end], end + 1
            negate = body.startswith("!")
            body = body[1:] if negate else body
            items, k = [], 0
            while k < len(body):  # fnmatch's ranges `a-z`; every other character literal
                if k + 2 < len(body) and body[k + 1] == "-":
                    items.append(f"{_escape(body[k])}-{_escape(body[k + 2])}")
                    k += 3
                else:
                    items.append(_escape(body[k]))
                    k += 1
            out.append(f"[{'^' if negate else ''}{''.join(items)}]")
        else:
            out.append(_escape(c))
    return compile_regex("(?s)" + "".join(out), "name pattern", case_sensitive=False)


def glob_match(name: str, pattern: str) -> bool:
    """`fnmatch.fnmatchcase(name.casefold(), pattern.casefold())`, in linear time."""
    return len(name) <= MAX_SUBJECT_CHARS and glob_regex(pattern).fullmatch(name) is not None
