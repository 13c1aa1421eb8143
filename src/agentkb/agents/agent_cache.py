"""pydantic-ai agents built once per agent configuration and reused by every run of it.

A configuration is what the built objects depend on: the model object (provider, model name, resolved key
and base URL, sampling settings), the instructions, the tools' names and descriptions, the columns asked
as output, and the knowledge bases and tables the run resolved. Runs that share it share one pydantic-ai
`Agent`, with its provider model and SDK client (over the one shared HTTP client); what belongs to a run
reaches the tools through the run's `deps`. Changing an agent (or one of its knowledge bases coming or
going) changes the configuration, so the next run builds anew; the least recently used are dropped.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic_ai import Agent

MAX_AGENTS = 256


def configuration_key(*parts: Any) -> str:
    """A digest of `parts` (JSON-able): the key of one configuration (no secret kept as text)."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


class AgentCache:
    """Built agents by configuration key, least recently used dropped beyond `size`."""

    def __init__(self, size: int = MAX_AGENTS) -> None:
        self.size = size
        self._agents: OrderedDict[str, Agent[Any, Any]] = OrderedDict()
        self.builds = 0

    def get(self, key: str, build: Callable[[], Agent[Any, Any]]) -> Agent[Any, Any]:
        agent = self._agents.get(key)
        if agent is None:
            agent = self._agents[key] = build()
            self.builds += 1
            while len(self._agents) > self.size:
                self._agents.popitem(last=False)
        else:
            self._agents.move_to_end(key)
        return agent

    def __len__(self) -> int:
        return len(self._agents)
