"""A stored secret is sent only to the endpoint it was given with.

An update that changes where a configuration connects — an endpoint field (`is_endpoint_key`: `base_url`
and every provider's spelling of it, `host`, `port`, `user`, `database`, connection URLs, `account(_id)`,
`project`, `region(_name)`, the `provider` or `engine` itself) — while a stored secret would be kept because the
update did not send it again (left out of a merge, or sent back as `******`) is refused: `check_bound`
raises a 400 that names the secret fields to send again, before anything is written. Changes that touch no
endpoint field keep the stored secrets (the read-modify-write round trip of the SDKs), and so does an
update that gives every kept secret again. `drop_carried` is the same rule for defaults the caller never
saw (the server's default model): their secrets are left out instead of refused. `refuse_sealed` turns
away an encrypted value sent in a request unless it is the stored one at its place (one copied from a
backup would otherwise be decrypted for the request's server).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from agentkb.errors import BadRequest
from agentkb.secrecy.masking import MASK, has_url_password, is_sealed, is_secret_key

_ENDPOINT_NAME = re.compile(
    r"^(?:.*_)?(?:base_url|api_base|api_url|api_host|endpoint|url|uri|host|hostname|server|port|user|username"
    r"|database|dbname|db_file|dsn|connection_string|account|account_id|project|project_id|region|region_name"
    r"|location|provider|engine)$"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
REASON = "a stored secret is only sent to the server it was given for"


def is_endpoint_key(key: object) -> bool:
    """Whether a field of this name says where a configuration connects (compared in snake case)."""
    if not isinstance(key, str):
        return False
    normalized = _CAMEL.sub("_", key).lower().replace("-", "_").replace(" ", "_")
    return _ENDPOINT_NAME.match(normalized) is not None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().rstrip("/") == b.strip().rstrip("/")
    if a in (None, "") or b in (None, ""):
        return a in (None, "") and b in (None, "")
    return str(a) == str(b)


def changed_endpoints(stored: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The endpoint fields (top level) whose value differs between `stored` and `new`."""
    keys = sorted({k for k in (*stored, *new) if is_endpoint_key(k)})
    return [k for k in keys if not _same(stored.get(k), new.get(k))]


def _secrets(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of each secret in `value`: secret fields, sealed values, URLs with a password."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if item is not None and (is_secret_key(key) or is_sealed(item) or has_url_password(item)):
                yield where, item
            else:
                yield from _secrets(item, where)


def _at(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _resent(value: Any) -> bool:
    """A secret the update gives in plain text (not left out, not `******`, not a stored sealed value)."""
    return value is not None and value != MASK and not is_sealed(value)


def carried_secrets(stored: Mapping[str, Any], new: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    """The secrets of `new` that are `stored`'s own, kept because `given` (the update) did not send them."""
    return [
        path for path, value in _secrets(new) if value == _at(stored, path) and not _resent(_at(given, path))
    ]


def refuse_sealed(given: Any, stored: Any = None, prefix: str = "", path: str = "") -> None:
    """400 for an encrypted value (`enc:v1:...`) in a request that is not the stored one at its place:
    clients are never shown one, and one copied from another record would be decrypted for this one."""
    if isinstance(given, Mapping):
        for key, item in given.items():
            refuse_sealed(item, stored, prefix, f"{path}.{key}" if path else str(key))
    elif isinstance(given, list | tuple):
        for index, item in enumerate(given):
            refuse_sealed(item, stored, prefix, f"{path}.{index}")
    elif is_sealed(given) and given != _at(stored, path):
        raise BadRequest(
            f"'{prefix}{path}' holds an encrypted value; send the secret itself", title="Invalid secret"
        )


def refuse(changed: list[str], carried: list[str], prefix: str = "") -> None:
    """400 when an endpoint changed and stored secrets would be kept; fields named with `prefix`."""
    if not changed or not carried:
        return
    fields = ", ".join(f"'{prefix}{k}'" for k in changed)
    secrets = ", ".join(f"'{prefix}{k}'" for k in carried)
    raise BadRequest(
        f"{fields} changed: send {secrets} again ({REASON})",
        title="Secret must be sent again",
    )


def check_bound(
    stored: Mapping[str, Any], new: Mapping[str, Any], given: Mapping[str, Any], prefix: str = ""
) -> None:
    """Refuse `new` (what an update would store over `stored`, from the update `given`) when it changes an
    endpoint field of `stored` but keeps one of its secrets that `given` did not send again; and `given`
    holding an encrypted value that is not `stored`'s (`refuse_sealed`)."""
    refuse_sealed(given, stored, prefix)
    refuse(changed_endpoints(stored, new), carried_secrets(stored, new, given), prefix)


def drop_carried(
    default: Mapping[str, Any], new: Mapping[str, Any], given: Mapping[str, Any]
) -> dict[str, Any]:
    """`new` (`given` merged over `default`) without `default`'s secrets when `given` moves an endpoint:
    a default's key stays with the default's server."""
    out = dict(new)
    if changed_endpoints(default, new):
        for path in carried_secrets(default, new, given):
            if "." not in path:
                out.pop(path, None)
    return out
