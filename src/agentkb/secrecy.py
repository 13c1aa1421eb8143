"""Secrets in records: which fields are secret, masking them in everything shown, sealing them at rest.

- **What is secret**: a field whose name is credential-like (`is_secret_key`): `api_key`, `<x>_api_key`,
  `password`, `passwd`, `pwd`, `passphrase`, `secret`, `<x>_secret`, `secret_key`, `secret_access_key`,
  `private_key`, `token`, `<x>_token`, `credentials`, `authorization`, `connection_string`, `dsn`,
  `service_account_json` / `service_account_key(s)`; names are compared in snake case (`apiKey`,
  `X-Api-Key` and `API_KEY` count too), never by substring (`max_tokens` and `ssl_key` are not secret).
- **Masking**: `mask_secrets` replaces every non-null secret value, at any depth, with `******` (as MindsDB
  does); `mask_text` hides secrets inside free text (error messages, log lines): every secret this
  process has sealed or revealed, URL passwords (`scheme://user:******@host`), `password=...`-style
  pairs and bearer tokens.
- **Sealing**: a `SecretBox` encrypts secret values with Fernet (AES-128-CBC + HMAC-SHA256) into text
  `enc:v1:<key id>:<token>` that fits the JSON columns they live in; the key id (8 hex digits of the key's
  SHA-256) names the key that sealed it, so a process that lacks it says so instead of failing obscurely.
  The key comes from `AGENTKB_SECRET_KEY` (several keys, comma-separated: the first seals, all reveal) or
  from a key file generated once (`<data_dir>/secret.key`, mode 0600). Values are revealed only where
  they are used (calling a provider, connecting to a database) and never into a response.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from agentkb.errors import AgentKBError
from agentkb.settings import Settings

log = logging.getLogger("agentkb.secrets")

MASK = "******"
SEALED_PREFIX = "enc:v1:"
ENV_SOURCE = "AGENTKB_SECRET_KEY"
KEY_FILE_NAME = "secret.key"

_SECRET_NAME = re.compile(
    r"^(?:.*_)?(?:api_?key|password|passwd|pwd|passphrase|secret|secret_key|secret_access_key|private_key"
    r"|token|credentials?|authorization|connection_string|dsn|service_account_(?:json|keys?))$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEALED = re.compile(r"^enc:v1:([0-9a-f]{8}):([A-Za-z0-9_=-]+)$")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@'\"]*):[^\s@/'\"]+@")


# --- what is secret, and masking it --------------------------------------------------------------------


def is_secret_key(key: object) -> bool:
    """Whether a field of this name holds a credential."""
    if not isinstance(key, str):
        return False
    normalized = _CAMEL.sub("_", key).lower().replace("-", "_").replace(" ", "_")
    return _SECRET_NAME.match(normalized) is not None


def has_url_password(value: object) -> bool:
    """A text holding a URL with a password (`scheme://user:password@host`): secret whatever its field."""
    return isinstance(value, str) and "@" in value and _URL_PASSWORD.search(value) is not None


def _is_secret(key: object, value: object) -> bool:
    return value is not None and (is_secret_key(key) or has_url_password(value))


def _walk(value: Any, leaf: Callable[[Any, Any], Any], key: object = None) -> Any:
    """A copy of `value` (dicts and lists, at any depth) with `leaf(key, scalar)` applied to each scalar,
    and to the whole value of a secret field (a secret object is one value)."""
    if is_secret_key(key) and value is not None:
        return leaf(key, value)
    if isinstance(value, Mapping):
        return {k: _walk(v, leaf, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(item, leaf) for item in value]
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
    return _walk(value, _mask_leaf)


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
_MIN_KNOWN = 6  # shorter values would mask ordinary words and numbers everywhere
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
    text = _URL_PASSWORD.sub(rf"\1:{MASK}@", text)
    text = _KEY_VALUE.sub(rf"\1\2\3{MASK}", text)
    text = _BEARER.sub(rf"\1 {MASK}", text)
    return _PROVIDER_KEY.sub(MASK, text)


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


# --- sealing -------------------------------------------------------------------------------------------


class SecretUnavailable(AgentKBError):
    """A stored secret cannot be decrypted (another key sealed it, or it was altered)."""

    status = 500
    title = "Secret cannot be decrypted"


class SecretKeyError(ValueError):
    """The configured key (or key file) is unusable; the message never contains the key."""


def generate_key() -> str:
    return Fernet.generate_key().decode()


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def is_sealed(value: object) -> bool:
    return isinstance(value, str) and value.startswith(SEALED_PREFIX) and _SEALED.match(value) is not None


def sealed_key_id(value: object) -> str | None:
    match = _SEALED.match(value) if isinstance(value, str) else None
    return match.group(1) if match else None


def parse_keys(text: str, source: str) -> list[str]:
    """Keys separated by commas, spaces or lines (`#` starts a comment line); each must be a Fernet key."""
    keys: list[str] = []
    for line in text.splitlines():
        if line.strip().startswith("#"):
            continue
        keys += [k for k in re.split(r"[\s,]+", line) if k]
    if not keys:
        raise SecretKeyError(f"{source} holds no key")
    for index, key in enumerate(keys):
        try:
            Fernet(key.encode())
        except (ValueError, TypeError):
            raise SecretKeyError(
                f"key #{index + 1} of {source} is not a valid key (44 characters of URL-safe base64, as "
                "printed by `python -c 'from cryptography.fernet import Fernet; "
                "print(Fernet.generate_key().decode())'`)"
            ) from None
    return list(dict.fromkeys(keys))


class SecretBox:
    """Seals and reveals the secret fields of JSON values. The first key seals; every key reveals."""

    def __init__(self, keys: Sequence[str], source: str) -> None:
        self.source = source
        self._keys = list(keys)
        self._fernets = {key_id(k): Fernet(k.encode()) for k in self._keys}
        self.primary = key_id(self._keys[0]) if self._keys else None

    @classmethod
    def from_environment(cls) -> SecretBox:
        """For services built without a runtime (tests, scripts): `AGENTKB_SECRET_KEY`, or no key at all
        (then plain values pass and sealing or revealing a sealed value is an error)."""
        value = os.environ.get(ENV_SOURCE)
        return cls(parse_keys(value, ENV_SOURCE) if value else [], ENV_SOURCE)

    @property
    def keys(self) -> list[str]:
        return list(self._keys)

    @property
    def key_ids(self) -> list[str]:
        return list(self._fernets)

    def _unavailable(self, kid: str | None, where: str, corrupt: bool = False) -> SecretUnavailable:
        place = f" ({where})" if where else ""
        if corrupt:
            return SecretUnavailable(
                f"A stored secret{place} was sealed with key {kid} but does not decrypt with it: the stored "
                "value was altered. Set the secret again."
            )
        have = ", ".join(self.key_ids) or "none"
        return SecretUnavailable(
            f"A stored secret{place} was encrypted with key {kid}, which this process does not have "
            f"(its keys: {have}, from {self.source}). Every process sharing the database must use the "
            "same AGENTKB_SECRET_KEY (see docs/configuration.md); or set the secret again."
        )

    def seal_value(self, value: Any) -> Any:
        """One secret value as `enc:v1:<key id>:<token>` (JSON inside, so numbers and objects survive);
        a value already sealed, under any key, is kept as it is."""
        if value is None or is_sealed(value):
            return value
        if self.primary is None:
            raise SecretUnavailable(
                "No secret key is configured to encrypt secrets with: set AGENTKB_SECRET_KEY",
                title="Secret key missing",
            )
        remember(value)
        token = self._fernets[self.primary].encrypt(json.dumps(value).encode()).decode()
        return f"{SEALED_PREFIX}{self.primary}:{token}"

    def reveal_value(self, value: Any, where: str = "") -> Any:
        match = _SEALED.match(value) if isinstance(value, str) else None
        if match is None:
            return value
        kid, token = match.groups()
        fernet = self._fernets.get(kid)
        if fernet is None:
            raise self._unavailable(kid, where)
        try:
            plain = json.loads(fernet.decrypt(token.encode()))
        except (InvalidToken, ValueError):
            raise self._unavailable(kid, where, corrupt=True) from None
        remember(plain)
        return plain

    def seal(self, value: Any) -> Any:
        """A copy of `value` with every secret field, and every text holding a URL password (at any
        depth), sealed under the first key."""
        return _walk(value, lambda k, v: self.seal_value(v) if _is_secret(k, v) else v)

    def reveal(self, value: Any, where: str = "", *, strict: bool = True) -> Any:
        """A copy of `value` with every sealed string decrypted. `strict=False` shows a secret that cannot
        be decrypted as `******` (for records) instead of raising `SecretUnavailable` (for use)."""
        if isinstance(value, Mapping):
            return {
                k: self.reveal(v, f"{where}.{k}" if where else str(k), strict=strict)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.reveal(item, where, strict=strict) for item in value]
        if not is_sealed(value):
            return value
        try:
            return self.reveal_value(value, where)
        except SecretUnavailable:
            if strict:
                raise
            log.warning("a stored secret (%s) cannot be decrypted; shown masked", where or "value")
            return MASK

    def reseal(self, value: Any, where: str = "") -> Any:
        """A copy of `value` with every secret sealed under the first key: plain ones are sealed, ones
        sealed under another key are re-encrypted (key rotation); a key this box lacks raises."""

        def leaf(key: object, item: Any) -> Any:
            if is_sealed(item):
                if sealed_key_id(item) == self.primary:
                    return item
                return self.seal_value(self.reveal_value(item, f"{where} {key}" if key else where))
            return self.seal_value(item) if _is_secret(key, item) else item

        return _walk(value, leaf)


def sealed_key_ids(value: Any) -> list[str]:
    """The key ids of every sealed string in `value`."""
    if isinstance(value, Mapping):
        return [kid for v in value.values() for kid in sealed_key_ids(v)]
    if isinstance(value, list | tuple):
        return [kid for v in value for kid in sealed_key_ids(v)]
    kid = sealed_key_id(value)
    return [kid] if kid else []


def plain_secret_count(value: Any) -> int:
    """How many secrets in `value` are stored in plain text."""
    found: list[object] = []
    _walk(value, lambda k, v: found.append(k) if _is_secret(k, v) and not is_sealed(v) else None)
    return len(found)


# --- where the key comes from --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KeySource:
    """The keys in use and where they came from: the environment (`path` None) or a key file."""

    keys: list[str]
    path: Path | None
    created: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return ENV_SOURCE if self.path is None else str(self.path)

    def box(self) -> SecretBox:
        return SecretBox(self.keys, self.label)


def key_file(settings: Settings) -> Path:
    return settings.secret_key_file or settings.data_dir / KEY_FILE_NAME


def write_key_file(path: Path, keys: Sequence[str]) -> None:
    """Replace the key file atomically (a new file, mode 0600, renamed over the old one)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(_key_file_text(keys))
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _key_file_text(keys: Sequence[str]) -> str:
    lines = [
        "# agentkb secret key: encrypts the provider keys and passwords stored in the database.",
        "# The first key encrypts; any further keys only decrypt (during a rotation). Keep it private,",
        "# back it up, and give every process sharing the database the same key.",
        *keys,
    ]
    return "\n".join(lines) + "\n"


def _create_key_file(path: Path) -> bool:
    """Write a new key unless the file exists; True if this call created it. Two processes starting at
    once agree on one key: the file appears whole (hard link of a finished temp file) or not at all."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(_key_file_text([generate_key()]))
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink()


def load_keys(settings: Settings, *, create: bool = True) -> KeySource:
    """The keys: `AGENTKB_SECRET_KEY` if set, else the key file (created on first use when `create`)."""
    if settings.secret_key is not None:
        return KeySource(parse_keys(settings.secret_key.get_secret_value(), ENV_SOURCE), None)
    path = key_file(settings)
    created = False
    if not path.exists():
        if not create:
            raise SecretKeyError(f"no key file at {path} and AGENTKB_SECRET_KEY is not set")
        created = _create_key_file(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SecretKeyError(f"cannot read the key file {path}: {exc.strerror}") from None
    warnings = []
    if os.name == "posix" and path.stat().st_mode & 0o077:
        warnings.append(f"the key file {path} can be read by other users; run: chmod 600 {path}")
    return KeySource(parse_keys(text, str(path)), path, created, warnings)
