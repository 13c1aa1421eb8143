"""Where the key comes from: `AGENTKB_SECRET_KEY`, else a key file generated once (mode 0600)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentkb.secrecy.sealing import ENV_SOURCE, SecretBox, SecretKeyError, generate_key, parse_keys
from agentkb.settings import Settings

KEY_FILE_NAME = "secret.key"


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
