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

- **Binding**: a stored secret is sent only to the endpoint it was given with: an update that changes an
  endpoint field (`base_url` and its spellings, `host`, `port`, `user`, `database`, `provider`, ...) while
  keeping a stored secret it did not send again is a 400 naming the secrets to send (`check_bound`).

The package: `masking` (names, `mask_secrets`, `mask_text`), `sealing` (`SecretBox`), `keys` (the key's
source), `binding` (`check_bound`, `drop_carried`). Everything public is importable from `agentkb.secrecy`.
"""

from agentkb.secrecy.binding import (
    carried_secrets,
    changed_endpoints,
    check_bound,
    drop_carried,
    is_endpoint_key,
    refuse,
    refuse_sealed,
)
from agentkb.secrecy.keys import KEY_FILE_NAME, KeySource, key_file, load_keys, write_key_file
from agentkb.secrecy.masking import (
    MASK,
    SEALED_PREFIX,
    has_url_password,
    is_sealed,
    is_secret_key,
    mask_secrets,
    mask_text,
    remember,
    restore_masked,
    sealed_key_id,
    secret_values,
)
from agentkb.secrecy.sealing import (
    ENV_SOURCE,
    SecretBox,
    SecretKeyError,
    SecretUnavailable,
    generate_key,
    key_id,
    parse_keys,
    plain_secret_count,
    sealed_key_ids,
)

__all__ = [
    "ENV_SOURCE",
    "KEY_FILE_NAME",
    "MASK",
    "SEALED_PREFIX",
    "KeySource",
    "SecretBox",
    "SecretKeyError",
    "SecretUnavailable",
    "carried_secrets",
    "changed_endpoints",
    "check_bound",
    "drop_carried",
    "generate_key",
    "has_url_password",
    "is_endpoint_key",
    "is_sealed",
    "is_secret_key",
    "key_file",
    "key_id",
    "load_keys",
    "mask_secrets",
    "mask_text",
    "parse_keys",
    "refuse",
    "refuse_sealed",
    "plain_secret_count",
    "remember",
    "restore_masked",
    "sealed_key_id",
    "sealed_key_ids",
    "secret_values",
    "write_key_file",
]
