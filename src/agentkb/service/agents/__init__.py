"""Agents at work: completions and their run traces (`completions`, `traces`), agents as OpenAI chat models
(`openai_compat`), and what the MCP server adds (`mcp`)."""

from agentkb.service.agents.completions import CompletionService, RunOptions
from agentkb.service.agents.mcp import MCPService
from agentkb.service.agents.openai_compat import ChatService, step_record

__all__ = ["ChatService", "CompletionService", "MCPService", "RunOptions", "step_record"]
