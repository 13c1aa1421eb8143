"""The scripted OpenAI-compatible test servers, imported from one place.

The two stub modules are being merged into one; when that lands, only the imports below change.
"""

from __future__ import annotations

from tests.agents.llm_stub import LLMStub, Recorded, Reply, error, text, tool_call
from tests.embedding_stub import EmbeddingStub, Scripted

__all__ = ["EmbeddingStub", "LLMStub", "Recorded", "Reply", "Scripted", "error", "text", "tool_call"]
