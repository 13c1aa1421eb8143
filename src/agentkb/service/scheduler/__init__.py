"""MindsDB's JOBS at work: the scheduler every `serve` and `worker` process runs (`scheduler`), and one run
of a job (`run`: its IF, its statements, LAST). The jobs' records are the catalog's
(`service.catalog.sql_jobs`); this room sits above `sql` because a run executes SQL statements."""

from agentkb.service.scheduler.run import SQLJobRunner
from agentkb.service.scheduler.scheduler import Scheduler

__all__ = ["SQLJobRunner", "Scheduler"]
