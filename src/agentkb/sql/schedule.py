"""MindsDB's job schedules, pure: `EVERY [n] <unit>`, START / END dates, a job's statements split, and the
next tick of a schedule.

MindsDB's units are minute(s)/min, hour(s), day(s), week(s) and month(s); agentkb adds second(s)/sec, so a
job may run every few seconds (tests, near-real-time syncs). A schedule is kept as MindsDB shows it,
`every <n> <unit>` (`SCHEDULE_STR`).

Ticks lie on a grid from the job's START: `start + k * period`. After downtime, the next tick is the first
grid point after now, so missed ticks collapse into one run (MindsDB plans `max(previous + period, now)`
after each run, which runs a late job twice in a row).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dateutil.relativedelta import relativedelta

from agentkb.errors import BadRequest

_UNITS: dict[str, str] = {
    **dict.fromkeys(("second", "seconds", "sec", "secs"), "seconds"),
    **dict.fromkeys(("minute", "minutes", "min", "mins"), "minutes"),
    **dict.fromkeys(("hour", "hours"), "hours"),
    **dict.fromkeys(("day", "days"), "days"),
    **dict.fromkeys(("week", "weeks"), "weeks"),
    **dict.fromkeys(("month", "months"), "months"),
}
_DATE_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d")
MAX_STATEMENTS = 50  # statements one job may run


@dataclass(frozen=True, slots=True)
class Every:
    """A job's period: `count` of `unit` (one of seconds, minutes, hours, days, weeks, months)."""

    count: int
    unit: str

    @property
    def text(self) -> str:
        """MindsDB's SCHEDULE_STR: `every 2 hours` (the unit as given is not kept; its plural is)."""
        return f"every {self.count} {self.unit}"

    def step(self, n: int = 1) -> timedelta | relativedelta:
        if self.unit == "months":
            return relativedelta(months=self.count * n)
        if self.unit == "weeks":
            return timedelta(days=7 * self.count * n)
        return timedelta(**{self.unit: self.count * n})

    def approx_seconds(self) -> float:
        if self.unit == "months":
            return self.count * 30 * 86400.0
        step = self.step()
        assert isinstance(step, timedelta)
        return step.total_seconds()


def parse_every(text: str) -> Every:
    """`EVERY` as the parser gives it (`2 hours`, `hour`, `'10 sec'`), or a stored `every 2 hours`."""
    words = text.strip().strip("'\"").lower().split()
    if words and words[0] == "every":
        words = words[1:]
    if len(words) == 1:
        words = ["1", words[0]]
    if len(words) != 2 or not words[0].isdigit() or words[1] not in _UNITS:
        raise BadRequest(
            f"Can't read the schedule EVERY {text.strip()}: give EVERY [n] <unit>, a unit among "
            "second(s)/sec, minute(s)/min, hour(s), day(s), week(s), month(s)",
            title="Invalid job",
        )
    count = int(words[0])
    if count < 1:
        raise BadRequest("EVERY needs a positive number of units", title="Invalid job")
    return Every(count, _UNITS[words[1]])


def parse_date(text: str, what: str) -> datetime:
    """A START / END date: `now`, `YYYY-MM-DD HH:MM:SS[.ffffff]` or `YYYY-MM-DD`, in UTC (MindsDB's zone)."""
    value = text.strip().strip("'\"")
    if value.lower() == "now":
        return datetime.now(UTC)
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(value, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise BadRequest(
        f"Can't read the {what} date {value!r}: give 'YYYY-MM-DD HH:MM:SS' or 'YYYY-MM-DD' (UTC)",
        title="Invalid job",
    )


def next_tick(start: datetime, every: Every, after: datetime) -> datetime:
    """The first tick `start + k * period` (k >= 0) later than `after`: `start` itself while it is ahead (a
    job run before its START, on request, still runs at START)."""
    if after < start:
        return start
    if every.unit == "months":
        months = (after.year - start.year) * 12 + (after.month - start.month)
        k = max(1, months)
        while start + every.step(k) <= after:
            k += 1
        while k > 1 and start + every.step(k - 1) > after:
            k -= 1
        return start + every.step(k)
    period = every.step()
    assert isinstance(period, timedelta)
    k = int((after - start) / period) + 1
    return start + period * k


_STATEMENT = re.compile(r"""((?:[^;"'`]|"[^"]*"|'[^']*'|`[^`]*`)+)""")


def split_statements(text: str) -> list[str]:
    """A job's statements, split on `;` outside quotes (MindsDB's `split_sql`, with back-quoted names)."""
    parts = [p.strip() for p in _STATEMENT.findall(text)]
    statements = [p for p in parts if p]
    if not statements:
        raise BadRequest("A job needs at least one statement", title="Invalid job")
    if len(statements) > MAX_STATEMENTS:
        raise BadRequest(f"A job may run at most {MAX_STATEMENTS} statements", title="Invalid job")
    return statements


_VARIABLE = re.compile(r"\{\{\s*(PREVIOUS_START_DATETIME|START_DATETIME|START_DATE)\s*\}\}")


def fill_variables(sql: str, start: datetime, previous_start: datetime) -> str:
    """MindsDB's template variables: `{{START_DATETIME}}`, `{{START_DATE}}` (this run's tick) and
    `{{PREVIOUS_START_DATETIME}}` (the previous run's, or the job's creation for the first run)."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "START_DATE":
            return start.strftime("%Y-%m-%d")
        moment = start if name == "START_DATETIME" else previous_start
        return moment.strftime("%Y-%m-%d %H:%M:%S")

    return _VARIABLE.sub(value, sql)


def without_variables(sql: str) -> str:
    """The statement with its template variables blanked, for checking that it parses (as MindsDB)."""
    return _VARIABLE.sub("", sql)
