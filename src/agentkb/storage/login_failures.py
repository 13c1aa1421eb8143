"""Failed logins and invalid credentials per subject (`login_failures`, migration 0017_login_failures):
how many in a row, the last one, and until when the subject is blocked. Every statement is one atomic
step, so API processes sharing the database count together and concurrent attempts each take their own
number."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Column, DateTime, Integer, Table, Text, text
from sqlalchemy.ext.asyncio import AsyncConnection

from agentkb.storage.schema import metadata

login_failures = Table(
    "login_failures",
    metadata,
    Column("subject", Text, primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("last_failure", DateTime(timezone=True), nullable=False),
    Column("blocked_until", DateTime(timezone=True), nullable=True),
)

CLEANUP_BATCH = 100  # expired rows deleted by one recorded failure, at most


@dataclass(frozen=True, slots=True)
class Backoff:
    """`free` failures pass; failure number n >= free blocks for base_s * 2^(n - free), at most max_s;
    a count whose last failure is older than window_s starts again."""

    free: int
    base_s: float
    max_s: float
    window_s: float


@dataclass(frozen=True, slots=True)
class Recorded:
    subject: str
    failures: int
    blocked_s: float | None  # the block this failure began (seconds from now), or None


_EXPIRED = "f.last_failure < now() - make_interval(secs => CAST(:window_s AS double precision))"
_COUNT = f"CASE WHEN {_EXPIRED} THEN 1 ELSE f.failures + 1 END"


def _blocked_until(count: str) -> str:
    exponent = f"LEAST({count} - CAST(:free AS integer), 40)"  # 2^40 s is far above any cap
    seconds = (
        f"LEAST(CAST(:max_s AS double precision), CAST(:base_s AS double precision) * power(2, {exponent}))"
    )
    return f"CASE WHEN {count} >= CAST(:free AS integer) THEN now() + make_interval(secs => {seconds}) END"


# Count a failure for each subject not blocked now (a blocked one is left as it is and not returned), and
# delete a batch of other subjects' rows whose window has passed and whose block has ended.
_RECORD = text(
    f"""
    WITH expired AS (
        DELETE FROM login_failures WHERE subject IN (
            SELECT subject FROM login_failures AS f
            WHERE {_EXPIRED}
              AND (f.blocked_until IS NULL OR f.blocked_until <= now())
              AND NOT (f.subject = ANY(CAST(:subjects AS text[])))
            LIMIT {CLEANUP_BATCH} FOR UPDATE SKIP LOCKED
        )
    )
    INSERT INTO login_failures AS f (subject, failures, last_failure, blocked_until)
    SELECT s, 1, now(), {_blocked_until("1")} FROM unnest(CAST(:subjects AS text[])) AS s
    ON CONFLICT (subject) DO UPDATE SET
        failures = {_COUNT},
        last_failure = now(),
        blocked_until = {_blocked_until(_COUNT)}
    WHERE f.blocked_until IS NULL OR f.blocked_until <= now()
    RETURNING f.subject, f.failures,
        CAST(EXTRACT(EPOCH FROM f.blocked_until - now()) AS double precision) AS blocked_s
    """
)

_BLOCKED = text(
    """
    SELECT subject, CAST(EXTRACT(EPOCH FROM blocked_until - now()) AS double precision) AS wait_s
    FROM login_failures WHERE subject = ANY(CAST(:subjects AS text[])) AND blocked_until > now()
    """
)


async def record_failures(conn: AsyncConnection, subjects: list[str], backoff: Backoff) -> list[Recorded]:
    """Count one failure for each of `subjects` that is not blocked now; the rows counted (a subject
    missing from the answer was blocked, and was not counted)."""
    params = {
        "subjects": subjects,
        "free": backoff.free,
        "base_s": backoff.base_s,
        "max_s": backoff.max_s,
        "window_s": backoff.window_s,
    }
    rows = (await conn.execute(_RECORD, params)).all()
    return [Recorded(r.subject, r.failures, r.blocked_s) for r in rows]


async def blocked(conn: AsyncConnection, subjects: list[str]) -> dict[str, float]:
    """The subjects among `subjects` blocked now, with the seconds their block has left."""
    rows = await conn.execute(_BLOCKED, {"subjects": subjects})
    return {r.subject: float(r.wait_s) for r in rows}


async def forget(conn: AsyncConnection, subjects: list[str]) -> None:
    """Start the subjects' counts again (a successful login)."""
    await conn.execute(login_failures.delete().where(login_failures.c.subject.in_(subjects)))
