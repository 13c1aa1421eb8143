"""Data sources: external databases (MindsDB "integrations") that agents and knowledge bases read with SQL.

Names share MindsDB's one namespace with projects and system databases, and are matched case-insensitively
(the exact spelling first; DROP DATABASE matches exactly, as MindsDB's).
Secret parameters (`password`, tokens, keys) are stored sealed (`secrecy.SecretBox`), masked for
clients (`service.catalog.shown`), and decrypted only to connect. A secret sent back as `******` on update
keeps the stored one, unless the update changes where the source connects (`host`, `port`, `user`,
`database`, ...): then each stored secret must be sent again (`secrecy.check_bound`).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from sqlalchemy import Engine

from agentkb.destinations import DataSourcePolicy
from agentkb.errors import BadRequest, Conflict, NotFound
from agentkb.secrecy import SecretBox, check_bound, refuse_sealed, restore_masked
from agentkb.service.platform import access
from agentkb.sql import datasources, pushdown
from agentkb.storage import data_sources as repo
from agentkb.storage import projects as project_rows
from agentkb.storage.data_sources import DataSourceRow
from agentkb.storage.db import Database
from agentkb.storage.projects import Project
from agentkb.validation import check_dict, check_name, is_identifier

Batch = tuple[list[str], list[dict[str, Any]]]
_DONE = object()
MAX_BUFFERED_BATCHES = 2


def database_not_found(name: str) -> NotFound:
    return NotFound(f"Database with name {name} does not exist.", title="Database not found")


def name_conflict(name: str) -> Conflict:
    return Conflict(f"Database with name {name} already exists.", title="Name conflict")


def is_system(name: str) -> bool:
    return name.lower() in pushdown.RESERVED_NAMES


class DataSourceService:
    def __init__(
        self, db: Database, *, policy: DataSourcePolicy, max_streams: int = 8, box: SecretBox | None = None
    ) -> None:
        """`policy`: what a data source may connect to or open (`destinations.DataSourcePolicy`)."""
        self.db = db
        self.box = box or SecretBox.from_environment()
        self.policy = policy
        self._engines = datasources.EngineCache(policy)
        # Streams block their thread on backpressure: give them their own pool, not the loop's default one.
        self._workers = ThreadPoolExecutor(max_workers=max_streams, thread_name_prefix="agentkb-pushdown")

    async def list(self) -> list[DataSourceRow]:
        """Every data source; none for a project key (data sources are global: out of its reach)."""
        if access.scoped():
            return []
        async with self.db.connect() as conn:
            return await repo.list_all(conn)

    async def get(self, name: str) -> DataSourceRow:
        access.require_global(f"using data source {name}")
        row = None
        if is_identifier(name):
            async with self.db.connect() as conn:
                row = await repo.get(conn, name)
        if row is None:
            raise database_not_found(name)
        return row

    async def find_project(self, name: str) -> Project | None:
        """The project of that name, if the name is one (projects share the databases namespace)."""
        if not is_identifier(name):
            return None
        access.require_project(name)
        async with self.db.connect() as conn:
            return await project_rows.get(conn, name)

    async def create(
        self,
        name: object,
        engine: object,
        parameters: object,
        *,
        keep_case: bool = False,
        check_connection: bool = True,
    ) -> DataSourceRow:
        """Validate, test the connection (unless `check_connection` is False: MindsDB's REST default, which
        stores any parameters and connects when the source is first used), then store. 409 "Name conflict"
        if any database has the name (in any case). Names are lower-cased unless `keep_case` (SQL's
        back-quoted names and REST's names, as MindsDB's)."""
        access.require_write("creating a data source")
        access.require_global("creating a data source")
        checked = check_name(name, "name") if keep_case else check_name(name, "name").lower()
        if engine is None:
            raise BadRequest("'engine' is required", title="Missing field")
        kind = datasources.check_engine(engine)
        datasources.check_installed(kind)  # even unchecked: a source no query could ever reach
        params = {} if parameters is None else check_dict(parameters, "parameters")
        datasources.check_destination(kind, params, self.policy)
        refuse_sealed(params, None, "parameters.")
        if check_connection:  # 400 on malformed parameters, before any network I/O
            datasources.connection_spec(kind, params, self.policy)
        if is_system(checked):
            raise name_conflict(checked)
        async with self.db.connect() as conn:
            if await repo.get(conn, checked) or await project_rows.get(conn, checked):
                raise name_conflict(checked)
        if check_connection:
            await asyncio.to_thread(datasources.test_connection, kind, params, self.policy)
        async with self.db.transaction() as conn:
            row = None
            if await project_rows.get(conn, checked) is None:
                row = await repo.insert_new(conn, checked, kind, self.box.seal(params))
        if row is None:
            raise name_conflict(checked)
        return row

    async def put(
        self,
        name: str,
        engine: object,
        parameters: object,
        *,
        keep_case: bool = False,
        check_connection: bool = False,
    ) -> tuple[DataSourceRow, bool]:
        """MindsDB's `PUT /api/databases/{name}`: create the data source (True), or update its parameters
        (False): the given ones over the stored ones, `******` keeping a stored secret; with
        `check_connection` the merged parameters are tested before they are stored. The engine cannot
        change."""
        access.require_write("changing a data source")
        access.require_global("changing a data source")
        stored = None
        if is_identifier(name):
            async with self.db.connect() as conn:
                stored = await repo.get(conn, name)
        if stored is None:
            created = await self.create(
                name, engine, parameters, keep_case=keep_case, check_connection=check_connection
            )
            return created, True
        key = stored.name
        if engine is not None and datasources.check_engine(engine) != stored.engine:
            raise BadRequest(
                f"Database {key} uses engine {stored.engine}; the engine cannot change",
                title="Invalid engine",
            )
        given = {} if parameters is None else check_dict(parameters, "parameters")
        merged = {**stored.parameters, **restore_masked(given, stored.parameters)}
        datasources.check_destination(stored.engine, given, self.policy)
        check_bound(stored.parameters, merged, given, "parameters.")  # a password for host A is not for B
        if check_connection:
            plain = self.box.reveal(merged, f"database {key} parameters")
            datasources.connection_spec(stored.engine, plain, self.policy)
            await asyncio.to_thread(datasources.test_connection, stored.engine, plain, self.policy)
        async with self.db.transaction() as conn:
            row = await repo.update_parameters(conn, key, self.box.seal(merged))
        if row is None:
            raise database_not_found(name)
        return row, False

    async def delete(self, name: str, *, exact: bool = False) -> None:
        """`exact`: only the data source spelt exactly `name` (MindsDB's DROP DATABASE)."""
        access.require_write("deleting a data source")
        access.require_global("deleting a data source")
        if is_system(name):
            raise BadRequest(f"Cannot delete database {name}: it is a system database", title="Error")
        if not is_identifier(name):
            raise database_not_found(name)
        async with self.db.transaction() as conn:
            row = await (repo.get_exact(conn, name) if exact else repo.get(conn, name))
            project = await (project_rows.get_exact(conn, name) if exact else project_rows.get(conn, name))
            if row is None and project is not None:
                raise BadRequest(
                    f"Cannot delete database {name}: it is a project; use DELETE /api/projects/{name}",
                    title="Error",
                )
            deleted = row is not None and await repo.delete(conn, row.name)
        if not deleted or row is None:
            raise database_not_found(name)
        self._engines.discard(row.name)

    async def engine_for(self, name: str) -> tuple[Engine, str]:
        """The data source's pooled engine and its pushdown dialect (`postgres`, `mysql` or `sqlite`)."""
        row = await self.get(name)
        parameters = self.box.reveal(row.parameters, f"database {row.name} parameters")
        return self._engines.get(row.name, row.engine, parameters), datasources.dialect_of(row.engine)

    async def stream_query(self, sql: str, batch_size: int = 1000) -> AsyncIterator[Batch]:
        """Parse and validate `sql`, then yield `(columns, rows)` batches read in a worker thread.

        At most `MAX_BUFFERED_BATCHES` batches wait in memory: the worker blocks until the consumer catches up.
        400 for a refused query, 404 "Database not found" for an unknown data source.
        """
        query = await asyncio.to_thread(pushdown.parse_select, sql)  # sqlglot is CPU-bound on big queries
        engine, dialect = await self.engine_for(query.datasource)
        rendered = await asyncio.to_thread(query.render, dialect)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[object] = asyncio.Queue(maxsize=MAX_BUFFERED_BATCHES)
        stop = threading.Event()

        def put(item: object) -> bool:
            """Block until the queue takes `item`; False once the consumer has gone."""
            try:
                future = asyncio.run_coroutine_threadsafe(queue.put(item), loop)
            except RuntimeError:  # the loop is closed
                return False
            while True:
                try:
                    future.result(timeout=0.2)
                    return not stop.is_set()
                except TimeoutError:
                    if stop.is_set():
                        future.cancel()
                        return False

        def produce() -> None:
            rows = pushdown.stream_rows(engine, rendered, batch_size)
            try:
                for batch in rows:
                    if not put(batch):
                        return
                put(_DONE)
            except Exception as exc:  # noqa: BLE001 - handed to the consumer, which re-raises it
                put(exc)
            finally:
                rows.close()

        worker = loop.run_in_executor(self._workers, produce)
        try:
            while (item := await queue.get()) is not _DONE:
                if isinstance(item, BaseException):
                    raise item
                yield cast(Batch, item)
            await worker
        finally:
            stop.set()

    def close(self) -> None:
        """Dispose every pooled engine and stop accepting streams (for the app's shutdown)."""
        self._workers.shutdown(wait=False, cancel_futures=True)
        self._engines.dispose_all()
