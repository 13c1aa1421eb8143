"""Agents at work: completions and their run traces (`completions`, `traces`), agents as OpenAI chat models
(`openai_compat`), what the MCP server adds (`mcp`), and A2A tasks (`a2a`)."""

from agentkb.service.agents.a2a import A2ARequest, A2AService, A2ATask
from agentkb.service.agents.completions import CompletionService, RunOptions
from agentkb.service.agents.mcp import MCPService
from agentkb.service.agents.openai_compat import ChatService, step_record

__all__ = [
    "A2ARequest",
    "A2AService",
    "A2ATask",
    "ChatService",
    "CompletionService",
    "MCPService",
    "RunOptions",
    "step_record",
]
