"""Sealing secrets at rest: `SecretBox` encrypts secret values with Fernet (AES-128-CBC + HMAC-SHA256)
into text `enc:v1:<key id>:<token>` that fits the JSON columns they live in (JSON inside, so numbers and
objects survive); the key id names the key that sealed a value, so a process that lacks it says so."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from agentkb.errors import AgentKBError
from agentkb.secrecy.masking import (
    MASK,
    SEALED,
    SEALED_PREFIX,
    is_sealed,
    is_secret_value,
    remember,
    sealed_key_id,
    walk,
)

log = logging.getLogger("agentkb.secrets")
ENV_SOURCE = "AGENTKB_SECRET_KEY"


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
        match = SEALED.match(value) if isinstance(value, str) else None
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
        return walk(value, lambda k, v: self.seal_value(v) if is_secret_value(k, v) else v)

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
            return self.seal_value(item) if is_secret_value(key, item) else item

        return walk(value, leaf)


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
    walk(value, lambda k, v: found.append(k) if is_secret_value(k, v) and not is_sealed(v) else None)
    return len(found)
