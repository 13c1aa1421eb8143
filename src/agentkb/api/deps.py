"""Services for the routers, taken from the app's lifespan state (never module globals)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.service.agents import AgentService
from agentkb.service.completions import CompletionService
from agentkb.service.data_sources import DataSourceService
from agentkb.service.files import FileService
from agentkb.service.ingest import IngestService
from agentkb.service.knowledge_bases import KnowledgeBaseService
from agentkb.service.projects import ProjectService
from agentkb.service.search import SearchService
from agentkb.settings import Settings


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    projects: ProjectService
    agents: AgentService
    knowledge_bases: KnowledgeBaseService
    data_sources: DataSourceService
    ingest: IngestService
    search: SearchService
    embedders: EmbedderRegistry
    files: FileService
    completions: CompletionService


async def _services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(_services)]
