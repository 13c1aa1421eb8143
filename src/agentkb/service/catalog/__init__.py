"""What exists: projects, agents, knowledge bases (their records and settings), data sources, uploaded files,
a knowledge base's export and import (`transfer`), scheduled jobs' records (`sql_jobs`), the one lookup of a
KB by name (`kb_lookup`) and what of a record may be shown (`shown`)."""

from agentkb.service.catalog.agent_input import PROVIDERS, AgentInput
from agentkb.service.catalog.agents import AgentService
from agentkb.service.catalog.data_sources import DataSourceService, is_system
from agentkb.service.catalog.files import (
    BlobWriter,
    FileService,
    StagedBlob,
    archive_kind,
    check_file_name,
    file_exists,
)
from agentkb.service.catalog.kb_admin import (
    BODY_SETTING_KEYS,
    KnowledgeBaseAdmin,
    settings_only,
    with_body_settings,
)
from agentkb.service.catalog.knowledge_bases import KnowledgeBaseInput, KnowledgeBaseService
from agentkb.service.catalog.projects import ProjectService
from agentkb.service.catalog.shown import fit_to_show
from agentkb.service.catalog.sql_jobs import JobInput, SQLJobCatalog, job_not_found
from agentkb.service.catalog.transfer import SECRET_FIELDS, TransferService

__all__ = [
    "BODY_SETTING_KEYS",
    "PROVIDERS",
    "SECRET_FIELDS",
    "AgentInput",
    "AgentService",
    "BlobWriter",
    "DataSourceService",
    "FileService",
    "JobInput",
    "KnowledgeBaseAdmin",
    "KnowledgeBaseInput",
    "KnowledgeBaseService",
    "ProjectService",
    "SQLJobCatalog",
    "StagedBlob",
    "TransferService",
    "archive_kind",
    "check_file_name",
    "file_exists",
    "fit_to_show",
    "job_not_found",
    "is_system",
    "settings_only",
    "with_body_settings",
]
