"""The scripted OpenAI-compatible test server (`tests/openai_stub.py`), imported from one place."""

from __future__ import annotations

from tests.openai_stub import OpenAIStub, Recorded, Reply, Scripted, error, text, tool_call

__all__ = ["OpenAIStub", "Recorded", "Reply", "Scripted", "error", "text", "tool_call"]
