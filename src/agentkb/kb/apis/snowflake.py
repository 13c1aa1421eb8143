"""Snowflake Cortex's REST API: `https://<account>.snowflakecomputing.com/api/v2/cortex/inference:{embed,
complete}`, a bearer token with its type in `X-Snowflake-Authorization-Token-Type`.

MindsDB's parameters: `account_id` (formerly `snowflake_account_id`), `api_key` (a key-pair JWT, or a
programmatic access token written `pat/<token>`), or `private_key` (PEM) with `user`, from which a key-pair
JWT is made (RS256, valid an hour) and made again before it expires. agentkb also reads `base_url` (default
from the account). Nothing is read from the environment.
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from agentkb.errors import BadRequest
from agentkb.kb.apis.names import SNOWFLAKE, http_url, required, text

if TYPE_CHECKING:  # cryptography's key types: imported where a key pair is read or signs
    from cryptography.hazmat.primitives.asymmetric import rsa

_ACCOUNT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
JWT_LIFETIME = 3600
RENEW_BEFORE = 60  # seconds before expiry a new token is made
PAT_PREFIX = "pat/"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


_JWT_HEADER = _b64url(b'{"alg":"RS256","typ":"JWT"}')


def jwt_account(account: str) -> str:
    """The account as a key-pair JWT names it: without region or cloud (up to the first `.`; for a
    `.global` account, up to the first `-`), in upper case (Snowflake's rule)."""
    cut = "-" if ".global" in account else "."
    index = account.find(cut)
    return (account[:index] if index > 0 else account).upper()


@dataclass(slots=True)
class KeyPairToken:
    """Key-pair JWTs for `user` of `account`, signed with the private key, renewed before they expire."""

    account: str
    user: str
    private_key: rsa.RSAPrivateKey
    _token: str = ""
    _expires: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def token(self, now: float | None = None) -> str:
        at = time.time() if now is None else now
        with self._lock:
            if not self._token or at > self._expires - RENEW_BEFORE:
                self._token, self._expires = self._make(int(at)), at + JWT_LIFETIME
            return self._token

    def _make(self, now: int) -> str:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding

        public = self.private_key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        fingerprint = "SHA256:" + base64.b64encode(hashlib.sha256(public).digest()).decode()
        subject = f"{jwt_account(self.account)}.{self.user.upper()}"
        claims = {"iss": f"{subject}.{fingerprint}", "sub": subject, "iat": now, "exp": now + JWT_LIFETIME}
        signing_input = f"{_JWT_HEADER}.{_b64url(orjson.dumps(claims))}"
        signature = self.private_key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"


@dataclass(frozen=True, slots=True)
class SnowflakeAPI:
    base_url: str
    api_key: str | None = None  # a JWT or a programmatic access token (without `pat/`)
    token_type: str = "KEYPAIR_JWT"
    key_pair: KeyPairToken | None = None

    def url(self, operation: str) -> str:
        """`embed` or `complete`."""
        return f"{self.base_url}/cortex/inference:{operation}"

    def headers(self) -> dict[str, str]:
        token = self.key_pair.token() if self.key_pair is not None else self.api_key
        return {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": f"Bearer {token}",
            "X-Snowflake-Authorization-Token-Type": self.token_type,
        }


def account(config: Mapping[str, Any]) -> str | None:
    return text(config, "account_id", "snowflake_account_id")


def default_url(account_id: str) -> str:
    return f"https://{account_id.lower()}.snowflakecomputing.com/api/v2"


def _private_key(pem: str, field_name: str) -> rsa.RSAPrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise BadRequest(
            f"'{field_name}.private_key' is not an unencrypted PEM private key ({type(exc).__name__})",
            title=f"Invalid {field_name.replace('_', ' ')}",
        ) from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise BadRequest(
            f"'{field_name}.private_key' must be an RSA key (Snowflake's key-pair authentication)",
            title=f"Invalid {field_name.replace('_', ' ')}",
        )
    return key


def api(config: Mapping[str, Any], field_name: str) -> SnowflakeAPI:
    account_id = account(config)
    if account_id is None:
        raise required(field_name, "account_id", SNOWFLAKE, "the Snowflake account identifier")
    if not _ACCOUNT.match(account_id):
        raise BadRequest(
            f"'{field_name}.account_id' {account_id!r} is not a Snowflake account identifier",
            title=f"Invalid {field_name.replace('_', ' ')}",
        )
    base_url = http_url(text(config, "base_url") or default_url(account_id), field_name)
    pem = text(config, "private_key")
    if pem is not None:
        user = text(config, "user")
        if user is None:
            raise required(field_name, "user", SNOWFLAKE, "the user whose key private_key is")
        return SnowflakeAPI(base_url, key_pair=KeyPairToken(account_id, user, _private_key(pem, field_name)))
    key = text(config, "api_key")
    if key is None:
        raise required(
            field_name, "api_key", SNOWFLAKE, "a key-pair JWT or 'pat/<token>', or private_key and user"
        )
    if key.startswith(PAT_PREFIX):
        return SnowflakeAPI(base_url, key.removeprefix(PAT_PREFIX), "PROGRAMMATIC_ACCESS_TOKEN")
    return SnowflakeAPI(base_url, key)
