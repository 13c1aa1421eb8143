"""Reading knowledge bases: search (`search`), the KB SELECT executor of the SQL endpoint and the agents' KB
tools (`kb_select`), and evaluating a knowledge base's retrieval (`evaluate`)."""

from agentkb.service.retrieval.evaluate import EvaluateService, EvaluationRow, evaluate_input
from agentkb.service.retrieval.kb_select import KBSelect
from agentkb.service.retrieval.search import SearchService

__all__ = ["EvaluateService", "EvaluationRow", "KBSelect", "SearchService", "evaluate_input"]
