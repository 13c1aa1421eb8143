"""Where a service starts an agent run: `run_agent` imports the run loop (`run.py`, and with it pydantic-ai,
a large import) on the first run rather than when the server starts, and returns its event generator."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2

    from agentkb.agents.agent_cache import AgentCache
    from agentkb.agents.events import Event
    from agentkb.agents.tools import AgentTools
    from agentkb.agents.trace import RunTrace
    from agentkb.storage.agents import AgentRow


def run_agent(
    agent: AgentRow,
    messages: list[dict[str, Any]],
    tools: AgentTools,
    *,
    timeout_s: float,
    max_steps: int = 10,
    http_client: httpx2.AsyncClient,
    trace: RunTrace | None = None,
    columns: tuple[str, ...] = (),
    agents: AgentCache | None = None,
    stream_text: bool = False,
) -> AsyncGenerator[Event, None]:
    """`agentkb.agents.run.run_agent`'s events (see there); nothing runs before the first is asked for."""
    from agentkb.agents import run

    return run.run_agent(
        agent,
        messages,
        tools,
        timeout_s=timeout_s,
        max_steps=max_steps,
        http_client=http_client,
        trace=trace,
        columns=columns,
        agents=agents,
        stream_text=stream_text,
    )
