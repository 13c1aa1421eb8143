"""The agent run loop: one pydantic-ai run per question, streamed as `events`.

`run_agent` yields Start at once, then the run's Action/Step pairs as they happen, then Output (or
Error), then End. The pydantic-ai run lives in a producer task that puts events on a queue; the
generator only waits on that queue, so
- each event reaches the client as soon as it is produced (a slow tool or model delays nothing earlier);
- the overall deadline (`timeout_s`) is a plain wait on the queue: when it passes, the producer is
  cancelled and an Error(timeout) is emitted;
- closing or cancelling the generator (client gone) cancels the producer and any request in flight.
The `RunTrace` records every step with timings, the usage and how the run ended.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx2
from pydantic_ai import (
    Agent,
    CallToolsNode,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelRequestNode,
    RunContext,
)
from pydantic_ai.exceptions import ModelAPIError, UsageLimitExceeded
from pydantic_ai.messages import (
    PartDeltaEvent,
    PartStartEvent,
    RetryFeedbackPart,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.tools import Tool
from pydantic_ai.usage import UsageLimits

from agentkb.agents.agent_cache import AgentCache, configuration_key
from agentkb.agents.events import Action, Delta, End, Error, Event, Output, Source, Start, Step
from agentkb.agents.failures import classify
from agentkb.agents.prompt import Conversation, parse_messages, system_prompt
from agentkb.agents.providers import MissingCredentials, ProviderContext, build_model, model_settings
from agentkb.agents.responses import as_source, call_logs, quoted_chunks, tool_input_of, tool_schema
from agentkb.agents.structured import rows_of, rows_output
from agentkb.agents.tools import AgentTools, ToolResult, ToolSpec
from agentkb.agents.trace import RunTrace, TraceStep, public_model
from agentkb.storage.agents import AgentRow

log = logging.getLogger("agentkb.agents")

STOP_GRACE_S = 5.0
UNSTREAMED_PROVIDERS = ("extractive",)  # models with no streamed responses (a function model)


class _Runner:
    """The producer: runs pydantic-ai and puts this run's events on the queue (None when done)."""

    def __init__(
        self,
        agent: AgentRow,
        conversation: Conversation,
        tools: AgentTools,
        trace: RunTrace,
        queue: asyncio.Queue[Event | None],
        *,
        max_steps: int,
        http_client: httpx2.AsyncClient,
        columns: tuple[str, ...] = (),
        agents: AgentCache | None = None,
        stream_text: bool = False,
    ) -> None:
        self.agent = agent
        self.agents = agents
        self.columns = columns
        self.conversation = conversation
        self.tools = tools
        self.trace = trace
        self.queue = queue
        self.max_steps = max_steps
        self.http_client = http_client
        self.results: dict[str, tuple[ToolResult, float]] = {}
        self.sources: list[Source] = []
        self.context: list[dict[str, Any]] = []
        self.provider = str(agent.model.get("provider", ""))
        self.model_name = str(agent.model.get("model_name", ""))
        # text as it is written: not for rows (structured output) or a model that cannot stream
        self.stream_text = stream_text and not columns and self.provider not in UNSTREAMED_PROVIDERS
        self.responses = 0  # model responses so far (Delta.response)
        self.streamed = ""  # the text of the last model response, as streamed

    def emit(self, event: Event) -> None:
        self.queue.put_nowait(event)

    async def call_tool(self, name: str, call_id: str | None, tool_input: str) -> str:
        """Run one tool call for the model; its result (citations, context, timing) is kept for its Step."""
        started = time.perf_counter()
        result = await self.tools.call(name, tool_input)
        self.results[call_id or ""] = (result, round((time.perf_counter() - started) * 1000, 2))
        return result.observation

    def _agent(self) -> Agent[_Runner, Any]:
        """The pydantic-ai agent of this run's configuration: from `agents` when it was built before."""
        context = ProviderContext(
            model=self.agent.model,
            http_client=self.http_client,
            kb_names=list(self.tools.kb_names),
            table_names=list(self.tools.table_names),
        )
        instructions = system_prompt(
            self.agent.prompt_template, context.kb_names, context.table_names, self.conversation.system
        )
        output_type: Any = str
        if self.columns:
            output_type, asked = rows_output(self.columns)
            instructions += "\n\n" + asked
        specs = self.tools.specs()

        def build() -> Agent[_Runner, Any]:
            return Agent(
                build_model(context),
                deps_type=_Runner,
                instructions=instructions,
                tools=[_tool(spec) for spec in specs],
                model_settings=model_settings(self.agent.model),
                output_type=output_type,
                retries=2,
            )

        if self.agents is None:
            return build()
        key = configuration_key(
            self.agent.model,
            instructions,
            [(spec.name, spec.description, spec.input_description) for spec in specs],
            self.columns,
            context.kb_names,
            context.table_names,
        )
        return self.agents.get(key, build)

    async def run(self) -> None:
        tid = self.trace.trace_id
        usage: Any = None
        final: Event
        try:
            await self.tools.resolve()
            agent = self._agent()
            limits = UsageLimits(tool_calls_limit=self.max_steps, request_limit=self.max_steps + 5)
            async with agent.iter(
                self.conversation.prompt,
                message_history=self.conversation.history,
                usage_limits=limits,
                deps=self,
            ) as run:
                try:
                    async for node in run:
                        if isinstance(node, CallToolsNode):
                            await self._call_tools(node, run.ctx)
                        elif self.stream_text and isinstance(node, ModelRequestNode):
                            await self._stream_response(node, run.ctx)
                finally:
                    usage = run.usage
                output = run.result.output if run.result is not None else ""
                quoted = quoted_chunks(run.result.response) if run.result is not None else None
            rows = rows_of(output, self.columns)
            answer = output if rows is None else json.dumps(rows, default=str)
            self.trace.finish("completed", answer=answer)
            final = self._output(answer, rows, quoted)
        except UsageLimitExceeded:
            answer = f"I could not finish within {self.max_steps} steps."
            self.trace.finish("max_steps", answer=answer)
            final = self._output(answer)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure becomes an error event
            error_type, content = classify(exc, self.provider, self.model_name)
            if not isinstance(exc, ModelAPIError | MissingCredentials):
                log.warning("agent run %s failed", tid, exc_info=exc)
            self.trace.finish("error", error=content, error_type=error_type)
            final = Error(content=content, error_type=error_type, trace_id=tid)
        finally:
            self._record_usage(usage)
        self.emit(final)
        self.queue.put_nowait(None)

    def _output(
        self,
        answer: str,
        rows: list[dict[str, Any]] | None = None,
        quoted: list[tuple[str, str]] | None = None,
    ) -> Output:
        """The Output event. `quoted` (a model that says which chunks its answer quotes): the sources are
        those chunks, in that order; else every source the run's tools cited."""
        sources = self.sources
        if quoted is not None:
            by_chunk = {(str(s["name"]).casefold(), s["chunk_id"]): s for s in self.sources if s["chunk_id"]}
            sources = [by_chunk[key] for key in dict.fromkeys(quoted) if key in by_chunk]
        return Output(
            answer=answer,
            streamed=self.stream_text and bool(answer) and answer == self.streamed,
            rows=tuple(rows) if rows is not None else None,
            sources=tuple(sources),
            context=tuple(self.context),
            trace_id=self.trace.trace_id,
        )

    def _record_usage(self, usage: Any) -> None:
        self.trace.usage = {
            "requests": getattr(usage, "requests", 0),
            "tool_calls": getattr(usage, "tool_calls", 0),
            "input_tokens": getattr(usage, "input_tokens", 0),
            "output_tokens": getattr(usage, "output_tokens", 0),
            "duration_ms": self.trace.elapsed_ms(),
        }

    async def _stream_response(self, node: ModelRequestNode[_Runner, Any], ctx: Any) -> None:
        """Ask the model for its response as a stream and emit its text as Deltas as it comes (the graph then
        goes on with the streamed response, as with a plain request)."""
        self.responses += 1
        pieces: list[str] = []
        async with node.stream(ctx) as stream:
            async for event in stream:
                if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
                    piece = event.part.content
                elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                    piece = event.delta.content_delta
                else:
                    continue
                if piece:
                    pieces.append(piece)
                    self.emit(Delta(text=piece, response=self.responses, trace_id=self.trace.trace_id))
        self.streamed = "".join(pieces)

    async def _call_tools(self, node: CallToolsNode[_Runner, Any], ctx: Any) -> None:
        """Stream one model response's tool calls: Action before each tool runs, Step right after.
        Calls run one at a time (`sequential`); an Action waits until the previous call's Step."""
        logs = call_logs(node.model_response)
        waiting: list[str] = []
        active: str | None = None
        actions: dict[str, Action] = {}
        steps: dict[str, TraceStep] = {}
        starts: dict[str, float] = {}

        def start(call_id: str) -> None:
            nonlocal active
            action = actions[call_id]
            active = call_id
            starts[call_id] = time.perf_counter()
            now = datetime.now(UTC).isoformat()
            steps[call_id] = TraceStep(
                tool=action.tool, tool_input=action.tool_input, log=action.log, started_at=now
            )
            self.trace.steps.append(steps[call_id])
            self.emit(action)

        async with node.stream(ctx) as stream:
            async for event in stream:
                if isinstance(event, FunctionToolCallEvent):
                    part = event.part
                    log = (
                        logs.get(part.tool_call_id)
                        or f"Calling {part.tool_name} with input: {tool_input_of(part)}"
                    )
                    actions[part.tool_call_id] = Action(
                        tool=part.tool_name,
                        tool_input=tool_input_of(part),
                        log=log,
                        trace_id=self.trace.trace_id,
                    )
                    if active is None:
                        start(part.tool_call_id)
                    else:
                        waiting.append(part.tool_call_id)
                elif isinstance(event, FunctionToolResultEvent):
                    call_id = event.tool_call_id
                    if call_id not in actions:
                        continue
                    if call_id not in steps:
                        waiting = [w for w in waiting if w != call_id]
                        start(call_id)
                    self._step(actions[call_id], steps[call_id], event, starts[call_id])
                    if active == call_id:
                        active = None
                        if waiting:
                            start(waiting.pop(0))

    def _step(self, action: Action, step: TraceStep, event: FunctionToolResultEvent, started: float) -> None:
        found = self.results.pop(event.tool_call_id, None)
        if found is not None:
            result, duration = found
            observation = result.observation
            sources = [as_source(c) for c in result.citations]
            for source in sources:
                if source not in self.sources:
                    self.sources.append(source)
            self.context.extend(result.context)
        else:  # the call never ran (bad arguments, unknown tool): the model is told why
            part: Any = event.part
            observation = (
                part.model_response() if isinstance(part, RetryFeedbackPart) else part.model_response_str()
            )
            duration = round((time.perf_counter() - started) * 1000, 2)
            sources = []
        step.observation = observation
        step.duration_ms = duration
        step.citations = list(sources)
        self.emit(
            Step(
                tool=action.tool,
                tool_input=action.tool_input,
                log=action.log,
                observation=observation,
                trace_id=action.trace_id,
            )
        )


def _tool(spec: ToolSpec) -> Tool[_Runner]:
    async def call(ctx: RunContext[_Runner], tool_input: str) -> str:
        return await ctx.deps.call_tool(spec.name, ctx.tool_call_id, tool_input)

    return Tool.from_schema(
        call,
        name=spec.name,
        description=spec.description,
        json_schema=tool_schema(spec),
        takes_ctx=True,
        sequential=True,
    )


async def _stop(task: asyncio.Task[None]) -> None:
    """Cancel the producer and wait (shielded from the caller's own cancellation) for it to unwind."""
    if not task.done():
        task.cancel()
    with anyio.CancelScope(shield=True):
        await asyncio.wait({task}, timeout=STOP_GRACE_S)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved, so asyncio does not warn; the runner reports its own errors


async def run_agent(
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
    """Run `agent` on `messages` and yield its events. Raises BadRequest (before the first event) when the
    messages hold no question. Pass `trace` to keep the run's trace; it is complete once End is yielded
    or the generator is closed (status "cancelled" if the run had not finished). `columns` asks the model for
    its answer as rows with those columns (`structured.py`); Output.rows carries them. `agents` keeps the
    pydantic-ai agents built for earlier runs (`agent_cache.py`); without it each run builds its own.
    `stream_text`: the model's responses are streamed and their text emitted as Delta events as it comes
    (not for `columns`, nor for a model that cannot stream: the extractive one)."""
    conversation = parse_messages(messages)
    if trace is None:
        trace = RunTrace(agent.id, agent.project_id, conversation.prompt, public_model(agent.model))
    queue: asyncio.Queue[Event | None] = asyncio.Queue()
    runner = _Runner(
        agent,
        conversation,
        tools,
        trace,
        queue,
        max_steps=max_steps,
        http_client=http_client,
        columns=columns,
        agents=agents,
        stream_text=stream_text,
    )
    yield Start(prompt=conversation.prompt, trace_id=trace.trace_id)
    task = asyncio.create_task(runner.run(), name=f"agent-run-{trace.trace_id}")
    deadline = asyncio.get_running_loop().time() + timeout_s
    try:
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    event = await queue.get()
            except TimeoutError:
                content = f"The agent did not finish within {timeout_s:g} seconds"
                trace.finish("timeout", error=content, error_type="timeout")
                yield Error(content=content, error_type="timeout", trace_id=trace.trace_id)
                break
            if event is None:
                break
            yield event
    finally:
        await _stop(task)
        tools.close()
        trace.finish("cancelled", error="The run was cancelled before it finished (the client went away)")
    yield End()
