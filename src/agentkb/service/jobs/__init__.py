"""Ingestion jobs: running one to its end (`runner`), and the worker and views over them (`service`)."""

from agentkb.service.jobs.runner import JobRunner
from agentkb.service.jobs.service import JobService

__all__ = ["JobRunner", "JobService"]
