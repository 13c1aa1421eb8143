"""The conversation an agent run starts from: the request's messages and the agent's system prompt.

Messages come in MindsDB's two shapes, oldest first:
- `[{"question": ..., "answer": ...}]` (25.x and the SDK): the last question is the prompt; earlier pairs
  are history; empty or null answers are skipped;
- `[{"role": "user"|"assistant"|"system", "content": ...}]` (26.x): the last user message is the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentkb.errors import BadRequest

if TYPE_CHECKING:  # pydantic-ai is imported when a run first parses its messages (a large import)
    from pydantic_ai.messages import ModelMessage

DEFAULT_PROMPT_TEMPLATE = "You are an assistant, answer using the tables connected"
# MindsDB 25.14's default for an agent of `mode = 'retrieval'` (its DEFAULT_RAG_PROMPT_TEMPLATE, whose
# `Question: {question} / Context: {context} / Answer:` tail agentkb's conversation and tools stand for)
RETRIEVAL_PROMPT_TEMPLATE = (
    "You are an assistant for question-answering tasks. Use the following pieces of retrieved context to "
    "answer the question. If you don't know the answer, just say that you don't know. Use two sentences "
    "maximum and keep the answer concise."
)
MESSAGES_REQUIRED = 'Must provide "messages" parameter in POST body'


@dataclass(frozen=True, slots=True)
class Conversation:
    prompt: str
    history: list[ModelMessage] = field(default_factory=list)
    system: tuple[str, ...] = ()


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # OpenAI-style content parts
        texts = [str(p["text"]) for p in value if isinstance(p, dict) and isinstance(p.get("text"), str)]
        if len(texts) == len(value):
            return "\n".join(texts)
    raise BadRequest(f"{where} must be a string", title="Invalid messages")


def _turns(messages: list[Any]) -> list[tuple[str, str]]:
    turns: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise BadRequest(f"'messages[{i}]' must be an object", title="Invalid messages")
        if "question" in message or "answer" in message:
            turns.append(("user", _text(message.get("question"), f"'messages[{i}].question'")))
            turns.append(("assistant", _text(message.get("answer"), f"'messages[{i}].answer'")))
        elif "role" in message:
            role = message.get("role")
            if role not in ("user", "assistant", "system"):
                raise BadRequest(
                    f"'messages[{i}].role' must be 'user', 'assistant' or 'system'", title="Invalid messages"
                )
            turns.append((str(role), _text(message.get("content"), f"'messages[{i}].content'")))
        else:
            raise BadRequest(
                f"'messages[{i}]' needs 'question' (and 'answer') or 'role' and 'content'",
                title="Invalid messages",
            )
    return [(role, text) for role, text in turns if text.strip()]


def parse_messages(messages: Any) -> Conversation:
    """The prompt (last question), the history before it, and any system messages; 400 if no question."""
    if not isinstance(messages, list) or not messages:
        raise BadRequest(MESSAGES_REQUIRED, title="Missing parameter")
    turns = _turns(messages)
    last_user = max((i for i, (role, _) in enumerate(turns) if role == "user"), default=None)
    if last_user is None:
        raise BadRequest(
            "'messages' holds no question: the last message must ask something", title="Invalid messages"
        )
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

    history: list[ModelMessage] = []
    system: list[str] = []
    for role, text in turns[:last_user]:
        if role == "user":
            history.append(ModelRequest(parts=[UserPromptPart(text)]))
        elif role == "assistant":
            history.append(ModelResponse(parts=[TextPart(text)]))
        else:
            system.append(text)
    system += [text for role, text in turns[last_user:] if role == "system"]
    return Conversation(prompt=turns[last_user][1], history=history, system=tuple(system))


def system_prompt(
    template: str | None, kb_names: list[str], table_names: list[str], extra: tuple[str, ...] = ()
) -> str:
    """The agent's instructions followed by what data it has and how to call the tools."""
    parts = [(template or "").strip() or DEFAULT_PROMPT_TEMPLATE, *extra]
    if kb_names:
        example = kb_names[0]
        parts.append(
            f"Knowledge bases you can search: {', '.join(kb_names)}. kb_list_tool lists them; kb_info_tool "
            "shows a knowledge base's schema and sample rows. To search one, "
            "call kb_query_tool with one SQL statement, for example "
            f"`SELECT * FROM {example} WHERE content = 'what to look for' LIMIT 5`; metadata columns can be "
            "filtered too (`AND <column> = 'value'`). Results list chunk_content with its metadata and relevance."
        )
    if table_names:
        parts.append(
            f"Tables you can query: {', '.join(table_names)}. sql_db_list_tables lists them; sql_db_schema takes "
            "a comma-separated list of tables and shows their columns and sample rows; sql_db_query runs one "
            "read-only SELECT, naming tables as <data_source>.<table>."
        )
    if not kb_names and not table_names:
        parts.append("No knowledge bases or tables are connected to you.")
    parts.append(
        "Each tool takes one string argument, tool_input. Base your answer on what the tools return, mention "
        "the knowledge base or table it came from, and say so plainly when they hold no answer."
    )
    return "\n\n".join(parts)
