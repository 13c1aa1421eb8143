"""agentkb: AI agents over knowledge bases and SQL data, behind MindsDB's agents/KB HTTP API."""

__version__ = "0.1.0"
__all__ = ["__version__"]
