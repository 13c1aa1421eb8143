"""The MCP server (the official `mcp` SDK's `MCPServer`): served at `/mcp` over streamable HTTP, behind the
API's authentication, and over stdio by `agentkb mcp`.

Tools, each on the services the HTTP API uses (MindsDB's MCP server names `query` and `list_databases`
the same way):

- `list_knowledge_bases`: every knowledge base (or one project's), with its columns and resource URI;
- `search_knowledge_base`: the search of `POST .../knowledge_bases/{kb}/search` (query, metadata
  filters, limit, hybrid search, reranking) → chunks with metadata, distance and relevance;
- `list_databases` and `query`: one read-only SELECT over a data source or the uploaded files, through the
  SQL fence agents' `sql_db_query` uses;
- `list_agents` and `ask_agent`: an agent's full run (its tools, its model), answer with tool steps and
  citations.

Resources: `schema://knowledge_bases` (the list) and `schema://knowledge_bases/{project}/{name}` (one
knowledge base's description: its record, embedding model with secrets masked, document and chunk counts).

Over HTTP the server is stateless (each request stands alone: any API process may answer it) and answers
plain JSON. The app imports and builds the server on the first MCP request (`api/mcp_door.py`); the SDK's
session manager then runs until the app stops. MindsDB's clients name two more paths (its MCP app, mounted
at `/mcp`): `/mcp/streamable` (the same streamable HTTP server) and `/mcp/sse`, the SSE transport (the
SDK's `SseServerTransport`: a GET holds the event stream, whose `endpoint` event names
`/mcp/messages/?session_id=…`, where the client POSTs its messages). An SSE session lives in the process
that holds its stream, answers only the credential that opened it, and ends when the server begins
shutting down.
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import Field, ValidationError
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from agentkb import __version__
from agentkb.api.knowledge_bases import search_options
from agentkb.api.mcp_door import (
    MCP_PATH,
    MESSAGES_PATH,
    SSE_PATH,
    STREAMABLE_PATH,
    MCPApps,
    ServicesGetter,
)
from agentkb.api.schemas import FilterCondition, SearchRequest, kb_record
from agentkb.errors import AgentKBError, NotFound
from agentkb.service.types import KnowledgeBaseRow

KB_URI = "schema://knowledge_bases/{project}/{name}"
INSTRUCTIONS = (
    "agentkb holds knowledge bases (searchable document chunks), data sources (SQL databases, uploaded "
    "tables) and AI agents over them.\n"
    "1. `list_knowledge_bases`, then `search_knowledge_base` with a question (and metadata filters) to "
    "retrieve passages; read `schema://knowledge_bases/{project}/{name}` for a knowledge base's columns.\n"
    "2. `list_databases`, then `query` with one read-only SELECT naming `<database>.<table>`.\n"
    "3. `list_agents`, then `ask_agent` to have an agent answer with its own tools and cite its sources."
)


def _failed(exc: AgentKBError) -> ToolError:
    return ToolError(f"{exc.title}: {exc.detail}")


def _split(name: str, project: str | None, default: str) -> tuple[str, str]:
    """`<project>.<kb>` or `<kb>` (in `project`, else the default project)."""
    head, dot, tail = name.rpartition(".")
    if dot and head:
        return head, tail
    return project or default, name


def _kb_summary(kb: KnowledgeBaseRow) -> dict[str, Any]:
    return {
        "name": kb.name,
        "project": kb.project_name,
        "metadata_columns": kb.metadata_columns,
        "content_columns": kb.content_columns,
        "id_column": kb.id_column,
        "uri": KB_URI.format(project=kb.project_name, name=kb.name),
    }


def build_server(services: ServicesGetter) -> MCPServer[Any]:
    """The MCP server over the services `services()` returns (the app's, or the stdio command's)."""
    server: MCPServer[Any] = MCPServer("agentkb", version=__version__, instructions=INSTRUCTIONS)

    @server.tool(
        name="list_knowledge_bases",
        description="Lists the knowledge bases (of one project, or of all): name, project, metadata and "
        "content columns, and the URI of each one's description.",
    )
    async def list_knowledge_bases(
        project: Annotated[str | None, Field(description="Only this project's knowledge bases.")] = None,
    ) -> dict[str, Any]:
        try:
            kbs = await services().mcp.all_knowledge_bases(project)
        except AgentKBError as exc:
            raise _failed(exc) from None
        return {"knowledge_bases": [_kb_summary(kb) for kb in kbs]}

    @server.tool(
        name="search_knowledge_base",
        description="Searches a knowledge base: semantic (and full-text) search for `query`, narrowed by "
        "metadata `filters`. Returns chunks: id, chunk_id, chunk_content, metadata, distance, relevance.",
    )
    async def search_knowledge_base(
        knowledge_base: Annotated[str, Field(description="`<project>.<name>`, or the name alone.")],
        query: Annotated[str | None, Field(description="What to look for; omit to list chunks.")] = None,
        filters: Annotated[
            dict[str, Any] | list[FilterCondition] | None,
            Field(
                description="{metadata_key: value} (a list value means IN), or [{key, op, value}].",
            ),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="How many chunks.")] = 10,
        relevance_threshold: Annotated[float | None, Field(ge=0, le=1)] = None,
        hybrid_search: bool = True,
        project: Annotated[
            str | None, Field(description="The project, when not in `knowledge_base`.")
        ] = None,
    ) -> dict[str, Any]:
        s = services()
        project_name, kb_name = _split(knowledge_base, project, s.projects.default_project)
        try:
            body = SearchRequest.model_validate(
                {
                    "query": query,
                    "filters": filters,
                    "limit": limit,
                    "relevance_threshold": relevance_threshold,
                    "hybrid_search": hybrid_search,
                }
            )
            hits = await s.search.search(project_name, kb_name, search_options(body))
        except ValidationError as exc:
            raise ToolError(str(exc)) from None
        except AgentKBError as exc:
            raise _failed(exc) from None
        return {"knowledge_base": f"{project_name}.{kb_name}", "chunks": [h.as_dict() for h in hits]}

    @server.tool(
        name="list_databases",
        description="Lists the databases `query` can read: the connected data sources, and `files` (the "
        "uploaded tables).",
    )
    async def list_databases() -> dict[str, Any]:
        return {"databases": await services().mcp.database_names()}

    @server.tool(
        name="query",
        description="Runs one read-only SQL SELECT over one database and returns "
        '`{"type": "table", "column_names": [...], "data": [[...]], "truncated": bool}`. Name tables as '
        "`<database>.<table>` (see list_databases). Writes, several statements and system functions are "
        "refused.",
    )
    async def query(
        query: Annotated[str, Field(description="One SELECT, e.g. SELECT * FROM my_db.orders LIMIT 10.")],
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many rows.")] = 100,
    ) -> dict[str, Any]:
        try:
            result = await services().mcp.query(query, limit)
        except AgentKBError as exc:
            raise _failed(exc) from None
        except Exception as exc:  # the database's own error: the caller can correct the query
            raise ToolError(f"Query failed: {exc}") from None
        return {
            "type": "table",
            "column_names": result.columns,
            "data": result.rows,
            "truncated": result.truncated,
            "tables": result.tables,
        }

    @server.tool(
        name="list_agents",
        description="Lists the agents: the `agent` to give ask_agent, its project, knowledge bases, tables "
        "and model.",
    )
    async def list_agents() -> dict[str, Any]:
        agents = []
        for entry in await services().chat.models():
            model = entry.agent.model or {}
            agents.append(
                {
                    "agent": entry.id,
                    "name": entry.agent.name,
                    "project": entry.project,
                    "knowledge_bases": list(entry.agent.data.get("knowledge_bases") or []),
                    "tables": list(entry.agent.data.get("tables") or []),
                    "model": {k: model[k] for k in ("provider", "model_name") if k in model},
                }
            )
        return {"agents": agents}

    @server.tool(
        name="ask_agent",
        description="Asks an agent a question: it searches its knowledge bases and queries its tables as it "
        "sees fit, then answers. Returns the answer, its tool steps and the sources it cites.",
    )
    async def ask_agent(
        agent: Annotated[str, Field(description="The agent, as list_agents gives it.")],
        question: Annotated[str, Field(description="The question.")],
    ) -> dict[str, Any]:
        try:
            run = await services().chat.complete(agent, [{"role": "user", "content": question}])
        except AgentKBError as exc:
            raise _failed(exc) from None
        return {"answer": run.answer, **run.extension(), "usage": run.usage.as_dict()}

    @server.resource(
        "schema://knowledge_bases",
        mime_type="application/json",
        description="The knowledge bases: name, project, columns, and each one's description URI.",
    )
    async def knowledge_bases() -> list[dict[str, Any]]:
        return [_kb_summary(kb) for kb in await services().mcp.all_knowledge_bases()]

    @server.resource(
        KB_URI,
        mime_type="application/json",
        description="One knowledge base: its record (embedding and reranking models, columns, params; "
        "secrets masked) with its document and chunk counts.",
    )
    async def knowledge_base(project: str, name: str) -> dict[str, Any]:
        try:
            kb, documents, chunks = await services().mcp.describe(project, name)
        except NotFound as exc:
            raise ResourceNotFoundError(exc.detail) from None
        except AgentKBError as exc:
            raise ResourceError(exc.detail) from None
        return {**kb_record(kb), "document_count": documents, "chunk_count": chunks}

    return server


def door_apps(services: ServicesGetter) -> MCPApps:
    """The server over `services`, as the app's door (`api/mcp_door.py`) serves it: the streamable HTTP app
    at `/mcp` and `/mcp/streamable`, the SSE transport's two routes, and the session manager to run."""
    server = build_server(services)
    # the SDK's own Host / Origin check is off: the app's TrustedHosts checks the Host of every request,
    # `/mcp`'s included, against AGENTKB_ALLOWED_HOSTS (DNS rebinding); a cross-site page cannot send the
    # JSON POSTs MCP takes without a CORS preflight, which only AGENTKB_CORS_ORIGINS lets through
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    http_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        json_response=True,
        stateless_http=True,
        transport_security=security,
    )
    [streamable] = [r for r in http_app.routes if isinstance(r, Route) and r.path == MCP_PATH]
    sse = server.sse_app(sse_path=SSE_PATH, message_path=MESSAGES_PATH, transport_security=security).routes
    [stream] = [r for r in sse if isinstance(r, Route) and r.path == SSE_PATH]
    [messages] = [r for r in sse if isinstance(r, Mount)]
    return MCPApps(
        apps={
            MCP_PATH: streamable.app,
            STREAMABLE_PATH: streamable.app,
            SSE_PATH: _SSESession(stream.app),
            MESSAGES_PATH: _SSESession(messages.app),
        },
        session_manager=server.session_manager.run,
    )


class _SSESession:
    """One of the SSE transport's two routes: the request's principal (set by `Authenticate`) is the SDK's
    user, so a session answers only the credential that opened it (another one's POSTs are 404, as for an
    unknown session); and the request ends when the server begins shutting down (the stream would hold the
    process until its grace deadline)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        principal = scope.get("state", {}).get("principal")
        if principal is not None:
            token = AccessToken(token="agentkb", client_id=principal.id, scopes=[])  # noqa: S106 - no secret
            scope["user"] = AuthenticatedUser(token)
        stopping = scope["app"].state.shutdown.stopping
        async with anyio.create_task_group() as group:

            async def stop() -> None:
                await stopping.wait()
                group.cancel_scope.cancel()

            group.start_soon(stop)
            await self.app(scope, receive, send)
            group.cancel_scope.cancel()
