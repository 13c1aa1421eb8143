"""The parameter walk: every parameter MindsDB documents or accepts for CREATE KNOWLEDGE_BASE and CREATE
AGENT (and their queries) is either applied — this test observes its effect — or refused with a 400 that
names it. Never stored and left unused.

Where the lists come from (MindsDB @ v26.1 unless said): docs/mindsdb_sql/knowledge_bases/create.mdx and
insert_data.mdx (embedding_model, reranking_model with `method`, storage, metadata_columns, content_columns,
id_column, preprocessing's json_chunking options); `KnowledgeBaseInputParams` (controller.py: kb_no_upsert,
kb_skip_existing, is_sparse, vector_size); preprocessing/models.py (text_chunking_config with separators,
length_function, doc_id_column_name; ContextualConfig); `RerankerConfig` (mode, ...);
docs/mindsdb_sql/agents/agent_syntax.mdx and `AgentParams` (model with api_version, data, prompt_template,
timeout, mode); 25.14's agent params (mode = 'retrieval', is_demo, return_context, max_iterations, flat LLM
settings); SELECT FROM an agent USING model, data, prompt_template, timeout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentkb.agents.prompt import RETRIEVAL_PROMPT_TEMPLATE
from agentkb.kb import contextual
from agentkb.kb.chunking import chunk_document, chunking_config
from agentkb.kb.documents import ColumnSpec, row_documents
from tests.helpers import assert_problem, sql_error, sql_ok, sql_rows
from tests.openai_stub import OpenAIStub, Reply, text

P = "/api/projects/mindsdb"


def _chat(body: dict[str, Any]) -> Reply:
    """Reranking prompts get 0.6 for every passage; everything else a fixed answer."""
    prompt = str(body["messages"][-1]["content"])
    if prompt.startswith("Rate how well each passage"):
        return Reply(json.dumps({"scores": [0.6] * len(re.findall(r"^Passage \d+:", prompt, re.M))}))
    return Reply("walked")


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub(chat_script=_chat) as server:
        yield server


def _refused(response: httpx.Response, name: str) -> None:
    detail = assert_problem(response, 400)["detail"]
    assert name in detail, detail


def _kb(client: httpx.Client, name: str, stub: OpenAIStub, **fields: Any) -> httpx.Response:
    body = {"name": name, "embedding_model": stub.embedding_model(), **fields}
    return client.post(f"{P}/knowledge_bases", json={"knowledge_base": body})


def _chats(stub: OpenAIStub) -> list[dict[str, Any]]:
    return [r.body for r in stub.requests if r.path.endswith("/chat/completions")]


# --- CREATE KNOWLEDGE_BASE: refused, each by name -------------------------------------------------------------
REFUSED_KB: list[tuple[str, dict[str, Any]]] = [
    ("storage", {"storage": {"database": "my_pgvector", "table": "storage_table"}}),
    ("kb_no_upsert", {"params": {"kb_no_upsert": True}}),
    ("kb_skip_existing", {"params": {"kb_skip_existing": True}}),
    ("is_sparse", {"params": {"is_sparse": True, "vector_size": 8}}),
    ("vector_size", {"params": {"vector_size": 7}}),  # the stub embeds 8 dimensions
    ("colour", {"params": {"colour": "red"}}),
    ("embedding_model.api_version", {"embedding_model": {"api_version": "2024-02-01"}}),
    # MindsDB's methods (multi-class, binary, no-logprobs) are applied: tests/kb/test_rerank_providers.py
    (
        "reranking_model.method",
        {"reranking_model": {"provider": "openai", "model_name": "r", "method": "sideways"}},
    ),
    (
        "reranking_model.mode",
        {"reranking_model": {"provider": "openai", "model_name": "r", "mode": "listwise"}},
    ),
    ("reranking_model.api_version", {"reranking_model": {"model_name": "r", "api_version": "v"}}),
    ("preprocessing.type", {"preprocessing": {"type": "semantic_chunking"}}),
    ("length_function", {"preprocessing": {"text_chunking_config": {"length_function": "len"}}}),
    ("doc_id_column_name", {"preprocessing": {"text_chunking_config": {"doc_id_column_name": "my_id"}}}),
    (
        "json_chunking_config.chunk_size",
        {"preprocessing": {"type": "json_chunking", "json_chunking_config": {"chunk_size": 9}}},
    ),
    ("json_chunking_config", {"preprocessing": {"text_chunking_config": {}, "json_chunking_config": {}}}),
    (
        "contextual_config.colour",
        {"preprocessing": {"type": "contextual", "contextual_config": {"colour": 1}}},
    ),
    (
        "llm_config.colour",
        {"preprocessing": {"type": "contextual", "contextual_config": {"llm_config": {"colour": 1}}}},
    ),
]


@pytest.mark.parametrize("name, fields", REFUSED_KB, ids=[f"{n}-{i}" for i, (n, _) in enumerate(REFUSED_KB)])
def test_kb_parameter_refused_by_name(
    client: httpx.Client, stub: OpenAIStub, unique: str, name: str, fields: dict[str, Any]
) -> None:
    if "embedding_model" in fields:
        fields = {**fields, "embedding_model": {**stub.embedding_model(), **fields["embedding_model"]}}
    _refused(_kb(client, f"refused_{unique}", stub, **fields), name)
    assert client.get(f"{P}/knowledge_bases/refused_{unique}").status_code == 404  # nothing stored


def test_kb_parameters_refused_on_alter_and_insert(
    client: httpx.Client, stub: OpenAIStub, unique: str
) -> None:
    kb = f"walk_alter_{unique}"
    assert _kb(client, kb, stub).status_code == 201
    for name, using in (
        ("kb_skip_existing", "kb_skip_existing = true"),
        ("is_sparse", "is_sparse = true"),
        ("vector_size", "vector_size = 3"),
        ("colour", "colour = 'red'"),
        ("method", "reranking_model = {'model_name': 'r', 'method': 'sideways'}"),
    ):
        assert name in sql_error(client, f"ALTER KNOWLEDGE_BASE {kb} USING {using}")
    sql_ok(
        client, f"ALTER KNOWLEDGE_BASE {kb} USING is_sparse = false, vector_size = {stub.dim}"
    )  # what it has
    rows = [{"id": 1, "content": "x"}]
    for name, params in (
        ("colour", {"colour": 1}),
        ("model", {"model": {"x": 1}}),
        ("kb_no_upsert", {"kb_no_upsert": True}),
    ):
        refused = client.put(
            f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows, "params": params}}
        )
        _refused(refused, name)


# --- CREATE KNOWLEDGE_BASE: applied, each observed -------------------------------------------------------------
def test_kb_models_and_columns_are_applied(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb = f"walk_kb_{unique}"
    embedding = {**stub.embedding_model(model_name="emb-walk"), "api_key": "emb-key", "dimensions": 8}
    reranking = {
        "provider": "openai",
        "model_name": "rr-walk",
        "api_key": "rr-key",
        "base_url": stub.base_url,
    }
    created = _kb(
        client,
        kb,
        stub,
        embedding_model=embedding,
        reranking_model={**reranking, "filtering_threshold": 0.5},
        content_columns=["body"],
        metadata_columns=["tag"],
        id_column="sku",
        params={"is_sparse": False, "vector_size": 8},
    )
    assert created.status_code == 201, created.text
    stub.reset()
    rows = [{"sku": "A1", "body": "lamps give light", "tag": "home", "other": "dropped"}]
    assert client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": {"rows": rows}}).status_code == 200
    embedded = [r for r in stub.requests if r.path.endswith("/embeddings")]
    # embedding_model: provider openai at base_url, model_name, api_key, dimensions
    assert embedded and embedded[0].body["model"] == "emb-walk" and embedded[0].body["dimensions"] == 8
    assert embedded[0].headers["authorization"] == "Bearer emb-key"
    [row] = sql_rows(client, f"SELECT id, chunk_content, metadata FROM {kb}")
    # id_column, content_columns, metadata_columns
    assert row["id"] == "A1" and row["chunk_content"] == "lamps give light"
    assert row["metadata"]["tag"] == "home" and "other" not in row["metadata"]
    # reranking_model: called (model_name, key) and filtering_threshold applied (0.6 ≥ 0.5 kept, < 0.7 dropped)
    stub.reset()
    assert len(sql_rows(client, f"SELECT * FROM {kb} WHERE content = 'light'")) == 1
    [chat] = [r for r in stub.requests if "chat" in r.path]
    assert chat.body["model"] == "rr-walk" and chat.headers["authorization"] == "Bearer rr-key"
    sql_ok(client, f"ALTER KNOWLEDGE_BASE {kb} USING reranking_model = {{'filtering_threshold': 0.7}}")
    assert sql_rows(client, f"SELECT * FROM {kb} WHERE content = 'light'") == []
    # reranking_model = false: no reranking
    sql_ok(client, f"ALTER KNOWLEDGE_BASE {kb} USING reranking_model = false")
    stub.reset()
    assert len(sql_rows(client, f"SELECT * FROM {kb} WHERE content = 'light'")) == 1 and _chats(stub) == []
    again = json.dumps({**reranking, "filtering_threshold": 0.7})
    sql_ok(client, f"ALTER KNOWLEDGE_BASE {kb} USING reranking_model = {again}")  # and back: applied at once
    assert sql_rows(client, f"SELECT * FROM {kb} WHERE content = 'light'") == []
    # an insert's params: a new embedding key, applied (and sealed with the job meanwhile)
    stub.reset()
    new_key = {
        "rows": [{"sku": "A2", "body": "more"}],
        "params": {"embedding_model": {"api_key": "emb-key-2"}},
    }
    assert client.put(f"{P}/knowledge_bases/{kb}", json={"knowledge_base": new_key}).status_code == 200
    assert stub.requests[-1].headers["authorization"] == "Bearer emb-key-2"


def _chunks(content: str, preprocessing: dict[str, Any], **row: Any) -> list[tuple[str, str, dict[str, Any]]]:
    [doc] = row_documents([{"id": "D", "content": content, **row}], ColumnSpec())
    chunks = chunk_document(doc, chunking_config({"preprocessing": preprocessing}), "t")
    return [(c.chunk_id, c.content, c.metadata) for c in chunks]


JSON_DOC = json.dumps({"id": 1, "title": "Lamp", "specs": {"watts": 40}, "tags": ["a"], "x": None})
JSON_OPTIONS: list[tuple[str, Any]] = [
    ("flatten_nested", False),
    ("include_metadata", False),
    ("chunk_by_object", False),
    ("exclude_fields", ["title"]),
    ("include_fields", ["title"]),
    ("metadata_fields", ["specs.watts"]),
    ("extract_all_primitives", True),
    ("nested_delimiter", "__"),
    ("content_column", "body"),
]


@pytest.mark.parametrize("option, value", JSON_OPTIONS, ids=[o for o, _ in JSON_OPTIONS])
def test_json_chunking_option_is_applied(option: str, value: Any) -> None:
    """Each of MindsDB's json_chunking_config options (insert_data.mdx) changes the chunks it makes."""
    plain = _chunks(JSON_DOC, {"type": "json_chunking"}, tag="t")
    changed = _chunks(JSON_DOC, {"type": "json_chunking", "json_chunking_config": {option: value}}, tag="t")
    assert changed != plain


def test_text_and_contextual_settings_are_applied(stub: OpenAIStub) -> None:
    text_ = "one two three four five six seven eight nine ten eleven twelve"
    plain = _chunks(text_, {"text_chunking_config": {"chunk_size": 20, "chunk_overlap": 0}})
    assert all(len(c) <= 20 for _, c, _ in plain) and len(plain) > 2  # chunk_size
    overlapping = _chunks(text_, {"text_chunking_config": {"chunk_size": 20, "chunk_overlap": 10}})
    assert overlapping != plain  # chunk_overlap
    separated = _chunks(
        text_, {"text_chunking_config": {"chunk_size": 20, "chunk_overlap": 0, "separators": ["e", ""]}}
    )
    assert separated != plain  # separators
    config = chunking_config(
        {
            "preprocessing": {
                "type": "contextual",
                "contextual_config": {
                    "context_template": "[{CHUNK_CONTENT}]",
                    "summarize": True,
                    "chunk_size": 20,
                    "chunk_overlap": 0,
                },
            }
        }
    )
    assert config.contextual is not None and config.chunk_size == 20  # chunk_size of contextual_config
    assert contextual.prompt(config.contextual, "doc", "part") == "[part]"  # context_template
    assert contextual.with_context(config.contextual, "ctx", "part") == "ctx"  # summarize
    # llm_config (and its `params`) are the model that writes contexts: see test_kb_preprocessing.py, where a
    # knowledge base's contexts come from the stub LLM it names, with its key


# --- CREATE AGENT and queries: refused, each by name --------------------------------------------------------------
REFUSED_AGENT: list[tuple[str, str]] = [
    ("mode", "mode = 'sql'"),
    ("mode", "mode = 'chat'"),
    (
        "api_version",
        "model = {{'provider': 'openai', 'model_name': 'm', 'api_key': 'k', 'api_version': 'v'}}",
    ),
    ("skills", "skills = ['x']"),
    ("timeout_seconds", "timeout_seconds = 5"),
    ("return_context", "return_context = false"),
    ("is_demo", "is_demo = true"),  # MindsDB's own demo objects (26.1 refuses the key too)
    ("knowledge_basez", "data = {{'knowledge_basez': ['x']}}"),
]


@pytest.mark.parametrize(
    "name, using", REFUSED_AGENT, ids=[f"{n}-{i}" for i, (n, _) in enumerate(REFUSED_AGENT)]
)
def test_agent_parameter_refused_by_name(client: httpx.Client, unique: str, name: str, using: str) -> None:
    message = sql_error(client, f"CREATE AGENT refused_{unique} USING {using.format()}")
    assert name in message, message
    assert client.get(f"{P}/agents/refused_{unique}").status_code == 404


def test_agent_query_option_refused_by_name(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    agent = f"walk_q_{unique}"
    sql_ok(client, f"CREATE AGENT {agent} USING model = {_model(stub)}")
    assert "colour" in sql_error(client, f"SELECT answer FROM {agent} WHERE question = 'q' USING colour = 1")


# --- CREATE AGENT and queries: applied, each observed ----------------------------------------------------------------
def _model(stub: OpenAIStub, name: str = "walk-llm", **more: Any) -> str:
    model = {
        "provider": "openai",
        "model_name": name,
        "api_key": "agent-key",
        "base_url": stub.base_url,
        **more,
    }
    return json.dumps(model)


def _system(body: dict[str, Any]) -> str:
    return "\n".join(str(m["content"]) for m in body["messages"] if m["role"] == "system")


def _ask(client: httpx.Client, agent: str, using: str = "") -> list[dict[str, Any]]:
    return sql_rows(client, f"SELECT answer FROM {agent} WHERE question = 'hi' {using}")


def test_agent_parameters_are_applied(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    kb, other = f"walk_akb_{unique}", f"walk_bkb_{unique}"
    for name in (kb, other):
        assert _kb(client, name, stub).status_code == 201
    agent = f"walk_a_{unique}"
    sql_ok(
        client,
        f"CREATE AGENT {agent} USING model = {_model(stub, temperature=0.25)}, "
        f"data = {{'knowledge_bases': ['{kb}']}}, prompt_template = 'Answer as a pelican.', timeout = 30, "
        "max_iterations = 4, mode = 'text', return_context = true",
    )
    stub.reset()
    assert _ask(client, agent) == [{"answer": "walked"}]
    [body] = _chats(stub)
    # model: provider openai at base_url, model_name, api_key, a sampling setting
    assert body["model"] == "walk-llm" and body["temperature"] == 0.25
    assert stub.requests[-1].headers["authorization"] == "Bearer agent-key"
    system = _system(body)
    assert system.startswith("Answer as a pelican.")  # prompt_template
    assert f"mindsdb.{kb}" in system and other not in system  # data.knowledge_bases

    # per query (SELECT ... USING): model, prompt_template, data
    stub.reset()
    using = (
        f"USING model = {{'model_name': 'walk-llm-2'}}, prompt_template = 'Answer as a heron.', "
        f"data = {{'knowledge_bases': ['{other}']}}"
    )
    assert _ask(client, agent, using) == [{"answer": "walked"}]
    [body] = _chats(stub)
    assert body["model"] == "walk-llm-2" and _system(body).startswith("Answer as a heron.")
    assert f"mindsdb.{other}" in _system(body) and f"mindsdb.{kb}" not in _system(body)
    assert "data" in sql_error(client, f"SELECT answer FROM {agent} WHERE question = 'q' USING data = 5")

    # timeout (agent and query): the run's deadline, MindsDB 25.14's timeout answer
    stub.script(text("too late", delay=3))
    [late] = _ask(client, agent, "USING timeout = 0.3")
    assert "0.3 seconds" in late["answer"]

    # max_iterations: the tool calls a run may make
    stub.script(*[Reply(tool_calls=(("kb_list_tool", {"tool_input": ""}),))] * 3, text("done"))
    capped = _ask(client, agent, "USING max_iterations = 1")
    assert capped == [{"answer": "I could not finish within 1 steps."}]
    stub.script(*[Reply(tool_calls=(("kb_list_tool", {"tool_input": ""}),))] * 3, text("done"))
    assert _ask(client, agent, "USING max_iterations = 4") == [{"answer": "done"}]


def test_agent_mode_retrieval_is_applied(client: httpx.Client, stub: OpenAIStub, unique: str) -> None:
    agent = f"walk_r_{unique}"
    sql_ok(client, f"CREATE AGENT {agent} USING model = {_model(stub)}, mode = 'retrieval'")
    stub.reset()
    _ask(client, agent)
    assert _system(_chats(stub)[0]).startswith(RETRIEVAL_PROMPT_TEMPLATE)  # 25.14's default for retrieval
    assert "mode" in sql_error(client, f"ALTER AGENT {agent} USING mode = 'sql'")
