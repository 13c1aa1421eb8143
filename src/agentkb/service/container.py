"""The services one process holds, built once by the runtime and handed to every door (HTTP routers, the
SQL endpoint, the ingestion worker)."""

from __future__ import annotations

from dataclasses import dataclass

from agentkb.agents.providers import ModelClient
from agentkb.destinations import DataSourcePolicy, own_servers
from agentkb.ingest.crawl.source import UrlSource
from agentkb.ingest.files.bounds import ParseLimits
from agentkb.ingest.files.source import FileSource
from agentkb.kb.embedders.registry import EmbedderRegistry
from agentkb.secrecy import SecretBox
from agentkb.service.agents import A2AService, ChatService, CompletionService, MCPService
from agentkb.service.catalog import (
    AgentService,
    DataSourceService,
    FileService,
    KnowledgeBaseAdmin,
    KnowledgeBaseService,
    ProjectService,
    SQLJobCatalog,
    TransferService,
)
from agentkb.service.ingest import (
    ChunkContextService,
    ChunkWriter,
    IngestService,
    PartitionedInserts,
    QuerySources,
    VectorIndexMerger,
)
from agentkb.service.jobs import JobService
from agentkb.service.platform import AuthService, HealthService, LoginThrottle, MetricsService, Shutdown
from agentkb.service.retrieval import EvaluateService, KBSelect, SearchService
from agentkb.service.scheduler import Scheduler, SQLJobRunner
from agentkb.service.sql import SQLContext, SQLService, SQLTables, statement_handlers
from agentkb.settings import Settings
from agentkb.storage.db import Database
from agentkb.storage.read_routing import ReadRouter


@dataclass(frozen=True, slots=True)
class Services:
    settings: Settings
    box: SecretBox
    projects: ProjectService
    agents: AgentService
    knowledge_bases: KnowledgeBaseService
    kb_admin: KnowledgeBaseAdmin
    data_sources: DataSourceService
    ingest: IngestService
    jobs: JobService
    search: SearchService
    embedders: EmbedderRegistry
    files: FileService
    completions: CompletionService
    sql: SQLService
    evaluations: EvaluateService
    auth: AuthService
    shutdown: Shutdown
    health: HealthService
    metrics: MetricsService
    chat: ChatService  # agents as OpenAI chat models (`/v1`)
    a2a: A2AService  # agents' runs as A2A tasks (`/a2a/`)
    mcp: MCPService  # what the MCP server adds: every project's KBs, fenced read-only SQL
    transfer: TransferService
    sql_jobs: SQLJobCatalog  # MindsDB's JOBS: the records
    scheduler: Scheduler  # and their runs

    async def aclose(self) -> None:
        """Give back what the services hold (data-source engines, embedder and search HTTP clients), store the
        agent run traces not yet stored, and stop vector-index merges (an interrupted one is redone later)."""
        await self.completions.aclose()
        await self.ingest.writer.merger.close()
        self.data_sources.close()
        await self.embedders.aclose()
        await self.search.aclose()


def data_source_policy(settings: Settings, db: Database, *others: Database | None) -> DataSourcePolicy:
    """The settings' data-source policy; agentkb's own database servers are those of `db` and `others`
    (the read replica, the direct URL)."""
    urls = (db.url, *(other.url for other in others if other is not None))
    return DataSourcePolicy(
        file_dir=settings.data_source_dir,
        own_dir=settings.data_dir,
        own_servers=tuple(server for url in urls for server in own_servers(url)),
        allow_local=settings.data_source_allow_local,
    )


def build_services(
    settings: Settings,
    db: Database,
    embedders: EmbedderRegistry,
    http_client: ModelClient,
    shutdown: Shutdown | None = None,
    *,
    box: SecretBox | None = None,
    reads: ReadRouter | None = None,
    session_db: Database | None = None,
) -> Services:
    """`http_client` is the one HTTP client of the LLM providers (the runtime owns and closes it);
    `shutdown` is the process's (the runtime stops the worker when it begins); `box` seals and reveals
    stored secrets (default: `AGENTKB_SECRET_KEY` alone; the runtime passes its own); `reads` sends searches
    and KB listings to the read replica (`AGENTKB_DATABASE_READ_URL`) while it is current (default: all on
    `db`); `session_db` is where work that holds session-level advisory locks runs — job leases, vector-index
    merges — when `db` goes through a transaction-mode pooler (`AGENTKB_DATABASE_DIRECT_URL`; default `db`)."""
    shutdown = shutdown or Shutdown()
    box = box or SecretBox.from_environment()
    reads = reads or ReadRouter(db, None)
    session_db = session_db or db
    policy = data_source_policy(settings, db, reads.replica, session_db)
    data_sources = DataSourceService(db, box=box, policy=policy)
    agent_service = AgentService(db, settings.default_model, box=box)
    kb_service = KnowledgeBaseService(
        db,
        settings.default_embedding_model,
        embedders.dimension,
        settings.default_reranking_model,
        box=box,
        reads=reads,
    )
    kb_admin = KnowledgeBaseAdmin(db, embedders, box=box, session_db=session_db)
    search = SearchService(
        db, embedders, box=box, reads=reads, vector_cache_bytes=settings.vector_cache_mb * 1024**2
    )
    files = FileService(
        db,
        settings.data_dir / "files",
        max_bytes=settings.max_upload_bytes,
        limits=ParseLimits(
            member_bytes=settings.max_inflated_member_bytes,
            total_bytes=settings.max_inflated_bytes,
            sheet_cells=settings.max_sheet_cells,
            timeout_s=settings.parse_timeout_s,
        ),
    )
    query_sources = QuerySources(data_sources, files)  # an insert's SELECT: uploaded files or a data source
    contexts = ChunkContextService(db, settings.default_model, http_client)  # contextual chunking's LLM
    writer = ChunkWriter(embedders, box, VectorIndexMerger(session_db), contexts)
    ingest = IngestService(
        db,
        writer,
        query_sources,
        PartitionedInserts(db, writer, query_sources),
        {"files": FileSource(files), "urls": UrlSource(settings.crawl_allow_private)},
        heartbeat_s=settings.job_heartbeat_s,
        session_db=session_db,
    )
    projects = ProjectService(db, settings.default_project)
    sql_jobs = SQLJobCatalog(db)
    kb_select = KBSelect(search)  # KB SELECTs: the SQL endpoint's and the agents' KB tools'
    completions = CompletionService(
        db, agent_service, kb_select, data_sources, kb_service, settings, http_client, files=files
    )
    sql_context = SQLContext(
        projects=projects,
        agents=agent_service,
        knowledge_bases=kb_service,
        kb_admin=kb_admin,
        data_sources=data_sources,
        files=files,
        search=search,
        kb_select=kb_select,
        completions=completions,
        ingest=ingest,
        sources=query_sources,
        sql_jobs=sql_jobs,
        autobatch=settings.autobatch_inserts,
    )
    # EVALUATE reads and writes its test tables through an endpoint of its own, which has no EVALUATE
    reader = SQLService(sql_context, statement_handlers(evaluations=None))
    evaluations = EvaluateService(db, search, settings.default_model, http_client, SQLTables(reader, files))
    sql = SQLService(sql_context, statement_handlers(evaluations=evaluations))
    chat = ChatService(projects, agent_service, completions)
    return Services(
        settings=settings,
        box=box,
        projects=projects,
        agents=agent_service,
        knowledge_bases=kb_service,
        kb_admin=kb_admin,
        data_sources=data_sources,
        ingest=ingest,
        jobs=JobService(
            db, ingest.runner, ingest.queued, kb_service, stale_after_s=settings.job_stale_after_s
        ),
        search=search,
        embedders=embedders,
        files=files,
        completions=completions,
        sql=sql,
        evaluations=evaluations,
        auth=AuthService(db, settings, LoginThrottle(db, settings, secret=next(iter(box.keys), ""))),
        shutdown=shutdown,
        health=HealthService(db, shutdown),
        metrics=MetricsService(db, lambda: writer.merger.pending),
        chat=chat,
        a2a=A2AService(chat),
        mcp=MCPService(projects, kb_service, search, kb_select, data_sources, files),
        transfer=TransferService(db, box=box, max_inflated_bytes=settings.max_import_inflated_bytes),
        sql_jobs=sql_jobs,
        scheduler=Scheduler(
            db,
            sql_jobs,
            SQLJobRunner(sql),
            poll_s=settings.scheduler_poll_s,
            heartbeat_s=settings.job_heartbeat_s,
            stale_after_s=settings.job_stale_after_s,
            run_timeout_s=settings.job_run_timeout_s,
            concurrency=settings.job_run_concurrency,
            lease_db=session_db,
        ),
    )
