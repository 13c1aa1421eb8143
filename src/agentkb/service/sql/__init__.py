"""The SQL endpoint (`/api/sql/query`): MindsDB's SQL run over the services, one handler per statement."""

from agentkb.service.sql.context import SQLContext
from agentkb.service.sql.evaluate import SQLTables
from agentkb.service.sql.handlers import Handler, HandlerTable
from agentkb.service.sql.result import Result
from agentkb.service.sql.service import SQLService, statement_handlers

__all__ = ["Handler", "HandlerTable", "Result", "SQLContext", "SQLService", "SQLTables", "statement_handlers"]
