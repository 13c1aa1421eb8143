"""What is secret, and masking it: field names, values that are secrets wherever they are (URLs with a
password), records made fit to show, free text (errors, log lines) with secrets hidden."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

MASK = "******"
SEALED_PREFIX = "enc:v1:"
_SECRET_NAME = re.compile(
    r"^(?:.*_)?(?:api_?key|password|passwd|pwd|passphrase|secret|secret_key|secret_access_key|access_key_id|private_key"
    r"|token|credentials?|authorization|connection_string|dsn|service_account_(?:json|keys?))$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
SEALED = re.compile(r"^enc:v1:([0-9a-f]{8}):([A-Za-z0-9_=-]+)$")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@'\"]*):[^\s@/'\"]+@")


def is_secret_key(key: object) -> bool:
    """Whether a field of this name holds a credential."""
    if not isinstance(key, str):
        return False
    normalized = _CAMEL.sub("_", key).lower().replace("-", "_").replace(" ", "_")
    return _SECRET_NAME.match(normalized) is not None


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(SEALED_PREFIX) and SEALED.match(value) is not None


def sealed_key_id(value: object) -> str | None:
    match = SEALED.match(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def has_url_password(value: object) -> bool:
    """A text holding a URL with a password (`scheme://user:password@host`): secret whatever its field."""
    return isinstance(value, str) and "@" in value and _URL_PASSWORD.search(value) is not None


def is_secret_value(key: object, value: object) -> bool:
    return value is not None and (is_secret_key(key) or has_url_password(value))


def walk(value: Any, leaf: Callable[[Any, Any], Any], key: object = None) -> Any:
    """A copy of `value` (dicts and lists, at any depth) with `leaf(key, scalar)` applied to each scalar,
    and to the whole value of a secret field (a secret object is one value)."""
    if is_secret_key(key) and value is not None:
        return leaf(key, value)
    if isinstance(value, Mapping):
        return {k: walk(v, leaf, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [walk(item, leaf) for item in value]
    return leaf(key, value)


def _mask_leaf(key: object, value: Any) -> Any:
    if value is None:
        return value
    if is_secret_key(key) or is_sealed(value):
        return MASK
    if has_url_password(value):
        return _URL_PASSWORD.sub(rf"\1:{MASK}@", value)
    return value


def mask_secrets(value: Any) -> Any:
    """A copy of `value` (dicts and lists, at any depth) fit to show: every non-null secret field, and any
    sealed value, reads `******`, and so does the password of a URL."""
    return walk(value, _mask_leaf)


def restore_masked(given: Any, stored: Any) -> Any:
    """`given` with each value sent back as `******` replaced by the stored value at the same place, so a
    read-modify-write round trip (the SDKs do it) keeps the secret instead of storing the mask."""
    if not isinstance(given, Mapping) or not isinstance(stored, Mapping):
        return given
    out: dict[str, Any] = {}
    for key, value in given.items():
        if value == MASK and stored.get(key) is not None:
            out[key] = stored[key]
        else:
            out[key] = restore_masked(value, stored.get(key))
    return out


_KNOWN_LIMIT = 1000
_MIN_KNOWN = 8  # shorter values would mask ordinary words ("secret", "password") and numbers everywhere
_known: dict[str, None] = {}
_known_lock = threading.Lock()


def remember(value: object) -> None:
    """Note a secret's plain text so that `mask_text` hides it wherever it shows up in this process."""
    if not isinstance(value, str) or len(value) < _MIN_KNOWN or value == MASK:
        return
    with _known_lock:
        _known.pop(value, None)
        _known[value] = None
        while len(_known) > _KNOWN_LIMIT:
            del _known[next(iter(_known))]


_KEY_VALUE = re.compile(
    r"(?i)\b([a-z0-9_-]*(?:password|passwd|pwd|secret|api_?key|token|private_key|credentials))"
    r"(\s*[=:]\s*|[\"']\s*:\s*)([\"']?)[^\s\"',;&}]+"
)
# in lower case, the words one of which `_KEY_VALUE` needs
_KEY_WORDS = (
    "password",
    "passwd",
    "pwd",
    "secret",
    "api_key",
    "apikey",
    "token",
    "private_key",
    "credentials",
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
_PROVIDER_KEY = re.compile(r"\b(?:sk|rk)-[A-Za-z0-9_-]{8,}")


def mask_text(text: str, extra: Iterable[object] = ()) -> str:
    """`text` with secrets replaced by `******`: the known ones (`remember`), `extra` values (matched
    whatever their length), passwords in URLs, `key=value` / `"key": "value"` credential pairs, bearer
    tokens and `sk-...` provider keys."""
    if not text:
        return text
    with _known_lock:
        known = list(_known)
    values = {str(v) for v in extra if isinstance(v, str | int) and not isinstance(v, bool) and str(v)}
    for value in sorted(values.union(known), key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    # On ASCII text a pattern runs only where the words it needs are there (a log line of every request holds
    # none, and the scans are cheap next to the patterns). Masking only removes characters and adds `******`, so every word a
    # later step could need is in the text before the first. Other text goes through every pattern:
    # their case-insensitive matching reaches beyond ASCII.
    every = not text.isascii()
    lower = text.lower()
    if every or ("://" in text and "@" in text):
        text = _URL_PASSWORD.sub(rf"\1:{MASK}@", text)
    if every or any(word in lower for word in _KEY_WORDS):
        text = _KEY_VALUE.sub(rf"\1\2\3{MASK}", text)
    if every or "bearer" in lower or "basic" in lower:
        text = _BEARER.sub(rf"\1 {MASK}", text)
    if every or "sk-" in text or "rk-" in text:
        text = _PROVIDER_KEY.sub(MASK, text)
    return text


def secret_values(value: Any) -> list[Any]:
    """The plain values of the secret fields in `value` (for `mask_text(..., extra=...)`)."""
    found: list[Any] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if is_secret_key(key) and isinstance(item, str | int) and not isinstance(item, bool):
                found.append(item)
            else:
                found += secret_values(item)
    elif isinstance(value, list | tuple):
        for item in value:
            found += secret_values(item)
    return found
