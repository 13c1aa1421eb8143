"""The value types the services hand to their callers (records, search hits and options, agent events),
named in one place so the HTTP layer depends on the services alone, never on the layers beneath them."""

from agentkb.agents.events import Action, Delta, End, Error, Event, Output, Start, Step
from agentkb.agents.prompt import MESSAGES_REQUIRED
from agentkb.ingest.pipeline import IngestStats
from agentkb.ingest.request import InsertInput
from agentkb.kb.filters import Filter, FilterOp
from agentkb.kb.search import DEFAULT_ALPHA, DEFAULT_FUSION_K, Hit, SearchOptions
from agentkb.service.platform import LoginToken, Principal
from agentkb.sql.datasources import SUPPORTED_ENGINES
from agentkb.storage.agents import AgentRow
from agentkb.storage.data_sources import DataSourceRow
from agentkb.storage.files import FileRow
from agentkb.storage.jobs import JobRow
from agentkb.storage.knowledge_bases import KnowledgeBaseRow
from agentkb.storage.projects import Project
from agentkb.storage.sql_jobs import SQLJobRow, SQLJobRunRow

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_FUSION_K",
    "MESSAGES_REQUIRED",
    "SUPPORTED_ENGINES",
    "Action",
    "AgentRow",
    "DataSourceRow",
    "Delta",
    "End",
    "Error",
    "Event",
    "FileRow",
    "Filter",
    "FilterOp",
    "Hit",
    "IngestStats",
    "InsertInput",
    "JobRow",
    "KnowledgeBaseRow",
    "LoginToken",
    "Output",
    "Principal",
    "Project",
    "SQLJobRow",
    "SQLJobRunRow",
    "SearchOptions",
    "Start",
    "Step",
]
