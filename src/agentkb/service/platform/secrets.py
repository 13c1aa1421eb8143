"""Stored secrets as a whole: sealing the ones still in plain text, and re-encrypting all of them.

- `seal_plaintext_secrets` runs at every start-up (`runtime.open_runtime`): records written before secrets were
  encrypted (or by hand) get their secret fields sealed; rows another process holds are skipped (that
  process writes them sealed). A secret sealed under a key this process lacks makes the start-up fail
  (`UnknownSecretKeys`, naming the key ids), unless AGENTKB_ALLOW_UNKNOWN_SECRET_KEYS lets it through
  with an error line.
- `rotate_secrets` re-encrypts every stored secret under the box's first key in one transaction (all or
  nothing), for `agentkb keys rotate-secret`.

The sealed fields are those `secrecy.is_secret_key` names, in the columns `storage.secret_columns` lists;
an ingestion job's `request` is sealed only under `params` (its `rows` are data, whatever their names).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentkb.secrecy import SecretBox, SecretKeyError, plain_secret_count, sealed_key_ids
from agentkb.storage import secret_columns
from agentkb.storage.db import Database

log = logging.getLogger("agentkb.secrets")


@dataclass(slots=True)
class SecretReport:
    """What a pass over the stored secrets found and did."""

    rows: int = 0  # rows rewritten
    plain: int = 0  # secret fields that were in plain text
    sealed: int = 0  # secret fields sealed under a key (before the pass)
    unknown_keys: Counter[str] = field(default_factory=Counter)  # key id -> fields this box cannot open


def _secret_part(table: str, column: str, value: Any) -> tuple[Any, Callable[[Any], Any]]:
    """The part of a column value that holds secrets, and how to put a new part back."""
    if table == "ingest_jobs" and column == "request":
        request = value if isinstance(value, dict) else {}
        return request.get("params"), lambda part: {**request, "params": part}
    return value, lambda part: part


async def _rewrite(
    db: Database,
    box: SecretBox,
    transform: Callable[[Any, str], Any],
    *,
    skip_locked: bool,
    check: Callable[[SecretReport], None] = lambda report: None,
) -> SecretReport:
    """One pass over the stored secrets in one transaction; `check` sees the report before the commit (what
    it raises rolls the pass back)."""
    report = SecretReport()
    async with db.transaction() as conn:
        for table in secret_columns.SECRET_COLUMNS:
            for row_id, columns in await secret_columns.rows_for_update(conn, table, skip_locked=skip_locked):
                changed: dict[str, Any] = {}
                for column, value in columns.items():
                    part, put_back = _secret_part(table, column, value)
                    if part is None:
                        continue
                    kids = sealed_key_ids(part)
                    report.sealed += len(kids)
                    report.unknown_keys.update(k for k in kids if k not in box.key_ids)
                    report.plain += plain_secret_count(part)
                    new = transform(part, f"{table} {row_id} {column}")
                    if new != part:
                        changed[column] = put_back(new)
                if changed:
                    await secret_columns.update_row(conn, table, row_id, changed)
                    report.rows += 1
        check(report)
    return report


class UnknownSecretKeys(SecretKeyError):
    """The database holds secrets sealed under keys this process does not have: start-up is refused."""


def _unknown(report: SecretReport, box: SecretBox) -> str:
    return (
        f"{sum(report.unknown_keys.values())} stored secret(s) were encrypted with key(s) "
        f"{', '.join(sorted(report.unknown_keys))}, which this process does not have (its keys: "
        f"{', '.join(box.key_ids) or 'none'}, from {box.source})"
    )


async def seal_plaintext_secrets(
    db: Database, box: SecretBox, *, refuse_unknown: bool = False
) -> SecretReport:
    """Seal every secret field still stored in plain text (values sealed under any key stay as they are).
    Secrets sealed under keys `box` lacks are logged; with `refuse_unknown` they raise `UnknownSecretKeys`
    instead (the key ids in the message, never a key), and nothing is written."""

    def refuse(report: SecretReport) -> None:
        if refuse_unknown and report.unknown_keys:
            raise UnknownSecretKeys(
                f"refusing to start: {_unknown(report, box)}. Start every process sharing the database with "
                f"the same AGENTKB_SECRET_KEY, holding key(s) {', '.join(sorted(report.unknown_keys))} "
                "(several keys, comma-separated: the first encrypts, all decrypt); if they are lost for good, "
                "start with AGENTKB_ALLOW_UNKNOWN_SECRET_KEYS=true and set those secrets again "
                "(docs/configuration.md#secrets)"
            )

    report = await _rewrite(db, box, lambda part, _where: box.seal(part), skip_locked=True, check=refuse)
    if report.rows:
        log.info("encrypted %d stored secret(s) that were in plain text", report.plain)
    if report.unknown_keys:
        log.error(
            "%s; they cannot be used until every process sharing the database uses the same "
            "AGENTKB_SECRET_KEY",
            _unknown(report, box),
        )
    return report


async def rotate_secrets(db: Database, box: SecretBox) -> SecretReport:
    """Re-encrypt every stored secret under `box`'s first key (plain ones are sealed too). A secret
    sealed under a key the box lacks fails the whole rotation (`SecretUnavailable`); nothing changes."""
    return await _rewrite(db, box, lambda part, where: box.reseal(part, where), skip_locked=False)
