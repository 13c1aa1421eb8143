"""MindsDB's unit-test harness, rebuilt over real HTTP against agentkb.

MindsDB's executor tests (`tests/unit/executor_test_base.py` @v26.1.0) run SQL in process and patch the
embedder (`LLMClient`) and the LLM (`openai.OpenAI`). Here:

- `run_sql` sends the same SQL to `POST /api/sql/query` and returns what MindsDB's `run_sql` returns: a
  DataFrame for a table answer, `None` otherwise; an error answer raises `SQLError` (a `ValueError`, as
  MindsDB's executor errors are, so `pytest.raises(ValueError)` keeps its meaning).
- `MindsDBEmbeddings` serves MindsDB's own mock embedding function (`dummy_embeddings`, copied from
  `tests/unit/executor/test_knowledge_base.py` @v26.1.0) from the OpenAI stub's `/v1/embeddings`, so
  the tests' expectations about which rows are "similar" hold unchanged. `set_embedding(dimension, base)`
  is MindsDB's `set_embedding(mock, dimension, base)`.
- `save_file` uploads a DataFrame through `PUT /api/files/{name}` (MindsDB writes parquet straight into its
  file store; agentkb does not read parquet, so the rows travel as a JSON array, which keeps their types).
- `set_handler` stands in for MindsDB's mocked postgres handler: the DataFrames become real tables in a
  scratch database in the suite's embedded PostgreSQL (`pg_url`; `SCRATCH` is set up and its databases
  dropped by tests/compat/conftest.py), registered with `CREATE DATABASE <name> WITH ENGINE = 'postgres'`
  and the embedded server's parameters (`pg_source`'s: its Unix-socket directory, port and user).
- `agent_calls(stub)` is MindsDB's `mock_openai.agent_calls`: per LLM request, the text the agent sent
  that the previous request did not carry (request 0: the whole prompt; later: the tool observations).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import threading
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import httpx
import numpy as np
import pandas as pd
import psycopg
import pytest

from tests.compat.stubs import OpenAIStub, Reply, text

P = "/api/projects/mindsdb"


# --- MindsDB's mock embedder -----------------------------------------------------------------------------


def dummy_embeddings(string: str, dimension: int | None = None, base: int | None = None) -> list[float]:
    """`dummy_embeddings` from MindsDB's tests/unit/executor/test_knowledge_base.py @v26.1.0: vectors that are
    similar for similar words. Two guards MindsDB's mock lacks (it would raise instead): a position past the
    end wraps around, and a one-letter word counts its second letter as 0. An all-zero vector (no letters)
    gets a tiny last component, since cosine distance to a zero vector is undefined in pgvector."""
    if dimension is None:
        dimension = 25**2
    embeds = [0.0] * dimension
    if base is None:
        base = 25

    string = string.lower().replace(",", " ").replace(".", " ")
    for word in string.split():
        values = []
        for letter in word:
            val = ord(letter) - 97
            val = min(max(val, 0), 122)
            values.append(val)
        if len(values) < 2:
            values.append(0)

        pos = (values[0] * base + values[1]) % dimension
        values = values[2:6]
        emb = sum([val / base ** (i + 1) for i, val in enumerate(values)])
        embeds[pos] += emb

    if not any(embeds):
        embeds[-1] = 1e-6
    return embeds


def word_embeddings(string: str, dimension: int = 25**2) -> list[float]:
    """A bag of words (each word's count in a bucket of its own, by CRC-32): texts sharing words are near,
    as a real embedding model puts a one-word query near the texts about it, where `dummy_embeddings` puts
    words sharing their first two letters in one bucket ("not" next to "noise")."""
    embeds = [0.0] * dimension
    for word in re.findall(r"[a-z]+", string.lower()):
        embeds[zlib.crc32(word.encode()) % dimension] += 1.0
    if not any(embeds):
        embeds[-1] = 1e-6
    return embeds


class MindsDBEmbeddings(OpenAIStub):
    """The OpenAI stub, its `/v1/embeddings` answering with `dummy_embeddings`."""

    def __init__(self) -> None:
        super().__init__(self._embed, dim=25**2, in_order=True)
        self.dimension: int | None = None
        self.base: int | None = None
        self.function: Callable[[str], list[float]] | None = None

    def set_embedding(self, dimension: int | None = None, base: int | None = None) -> None:
        """MindsDB's `set_embedding(mock_embedding, dimension, base)` (`dummy_embeddings` again)."""
        self.dimension, self.base, self.function = dimension, base, None

    def use(self, function: Callable[[str], list[float]]) -> None:
        """Another embedding function in place of `dummy_embeddings`, until the next `set_embedding`."""
        self.function = function

    def _embed(self, texts: list[str]) -> list[list[float]]:
        if self.function is not None:
            return [self.function(t) for t in texts]
        return [dummy_embeddings(t, self.dimension, self.base) for t in texts]

    def mindsdb_model(self, **fields: Any) -> dict[str, Any]:
        """The embedding model MindsDB's tests pass (`openai`, `dummy_model`, `dummy_key`), pointed here."""
        config = {"provider": "openai", "model_name": "dummy_model", "api_key": "dummy_key"}
        config.update(fields)
        config["base_url"] = self.url
        return config


# --- SQL over HTTP -----------------------------------------------------------------------------------------


class SQLError(ValueError):
    """`{"type": "error"}` from `/api/sql/query`."""


def sql_answer(
    client: httpx.Client, sql: str, database: str = "mindsdb", params: Any = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"query": sql, "context": {"db": database}}
    if params is not None:
        body["params"] = params
    r = client.post("/api/sql/query", json=body)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def run_sql(
    client: httpx.Client, sql: str, database: str = "mindsdb", params: Any = None
) -> pd.DataFrame | None:
    answer = sql_answer(client, sql, database, params)
    if answer["type"] == "error":
        raise SQLError(answer["error_message"])
    if answer["type"] == "table":
        return pd.DataFrame(answer["data"], columns=answer["column_names"])
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return value


def df_json(df: pd.DataFrame) -> bytes:
    records = [{str(k): _plain(v) for k, v in row.items()} for row in df.to_dict(orient="records")]
    return json.dumps(records).encode()


class MindsDB:
    """What a MindsDB test class offers (`run_sql`, `save_file`, `set_handler`), over HTTP."""

    def __init__(self, client: httpx.Client, embeddings: MindsDBEmbeddings) -> None:
        self.client = client
        self.embeddings = embeddings

    def run_sql(self, sql: str, database: str = "mindsdb", params: Any = None) -> pd.DataFrame | None:
        return run_sql(self.client, sql, database, params)

    def save_file(self, name: str, df: pd.DataFrame) -> None:
        r = self.client.put(
            f"/api/files/{name}",
            files={"file": (f"{name}.json", df_json(df), "application/json")},
            data={"original_file_name": f"{name}.json"},
        )
        assert r.status_code == 200, r.text

    def set_handler(self, name: str, tables: Mapping[str, pd.DataFrame], schema: str | None = None) -> None:
        """A postgres data source `name` whose tables (in `schema`, default `public`) hold the DataFrames."""
        params = postgres_tables(tables, schema)
        self.run_sql(f"CREATE DATABASE {name} WITH ENGINE = 'postgres', PARAMETERS = {json.dumps(params)}")

    def reset(self) -> None:
        """A fresh MindsDB per test, as MindsDB's `setup_method` gives: drop agents, KBs, files, data sources
        and projects other than the default one."""
        c = self.client
        for project in c.get("/api/projects").json():
            base = f"/api/projects/{project['name']}"
            for agent in c.get(f"{base}/agents").json():
                c.delete(f"{base}/agents/{agent['name']}")
            for kb in c.get(f"{base}/knowledge_bases").json():
                c.delete(f"{base}/knowledge_bases/{kb['name']}")
        for file in c.get("/api/files/").json():
            c.delete(f"/api/files/{file['name']}")
        for database in c.get("/api/databases/").json():
            if database["type"] == "data" and database["name"] != "files":
                c.delete(f"/api/databases/{database['name']}")
            elif database["type"] == "project" and database["name"] != "mindsdb":
                c.delete(f"/api/projects/{database['name']}")


class ScratchServer:
    """Where `postgres_tables` makes its databases: the suite's embedded PostgreSQL. `open(pg_url, source)`
    (tests/compat/conftest.py, once per session) gives its admin URL and the data-source parameters that reach
    it (`pg_source` without its database); `close()` drops every database made."""

    def __init__(self) -> None:
        self.url = ""
        self.source: dict[str, Any] = {}
        self.databases: list[str] = []

    def open(self, url: str, source: Mapping[str, Any]) -> None:
        self.url = url
        self.source = {k: v for k, v in source.items() if k != "database"}

    def connect(self, database: str | None = None) -> psycopg.Connection[Any]:
        assert self.url, "no scratch PostgreSQL: tests/compat/conftest.py sets it up"
        if database is None:
            return psycopg.connect(self.url, autocommit=True)
        return psycopg.connect(self.url, dbname=database, autocommit=True)

    def create(self) -> str:
        database = f"compat_src_{uuid.uuid4().hex[:8]}"
        with self.connect() as conn:
            conn.execute(f"CREATE DATABASE {database}")
        self.databases.append(database)
        return database

    def close(self) -> None:
        if not self.databases:
            return
        with self.connect() as conn:
            for name in self.databases:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.databases.clear()


SCRATCH = ScratchServer()


def postgres_tables(tables: Mapping[str, pd.DataFrame], schema: str | None = None) -> dict[str, Any]:
    """A new scratch database in the suite's embedded PostgreSQL holding the DataFrames as tables (in
    `schema`, default `public`); returns MindsDB-style connection parameters for it."""
    database = SCRATCH.create()
    with SCRATCH.connect(database) as conn:
        target = schema or "public"
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{target}"')
        for table, df in tables.items():
            columns = ", ".join(f'"{c}" {_pg_type(df[c])}' for c in df.columns)
            conn.execute(f'CREATE TABLE "{target}"."{table}" ({columns})')
            marks = ", ".join(["%s"] * len(df.columns))
            with conn.cursor() as cur:
                cur.executemany(
                    f'INSERT INTO "{target}"."{table}" VALUES ({marks})',
                    [tuple(_plain(v) for v in row) for row in df.itertuples(index=False)],
                )
    params: dict[str, Any] = {**SCRATCH.source, "database": database}
    if schema is not None:
        params["schema"] = schema
    return params


def _pg_type(column: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(column):
        return "BOOLEAN"
    if pd.api.types.is_integer_dtype(column):
        return "BIGINT"
    if pd.api.types.is_float_dtype(column):
        return "DOUBLE PRECISION"
    return "TEXT"


# --- the LLM stub, with MindsDB's reranker mock point -------------------------------------------------------

_PASSAGE = re.compile(r"^Passage (\d+): (.*?)(?=\n\nPassage \d+: |\Z)", re.MULTILINE | re.DOTALL)
_QUERY = re.compile(r"^Query: (.*)$", re.MULTILINE)


def rerank_prompt(body: Mapping[str, Any]) -> tuple[str, list[str]] | None:
    """(query, passages) of one of agentkb's reranking requests (src/agentkb/kb/rerank.py: one user message
    with a `Query: ...` line and `Passage N: ...` paragraphs), or None for any other request."""
    messages = body.get("messages") or []
    if len(messages) != 1:
        return None
    content = _content(messages[0])
    query = _QUERY.search(content)
    passages = [m.group(2) for m in _PASSAGE.finditer(content)]
    if query is None or not passages:
        return None
    return query.group(1), passages


NO_REPLY = "(the stub has no scripted reply)"


class MindsDBLLM(OpenAIStub):
    """The OpenAI stub as the scripted LLM: `script(...)` queues replies (`Reply` only), answered in order,
    then `NO_REPLY`. While `get_scores` is set, reranking requests are answered with
    `{"scores": get_scores(query, docs)}` ahead of the queue: MindsDB's
    `patch("...BaseLLMReranker.get_scores")`. `scores_calls` records (query, docs) per reranking request
    (MindsDB's `mock_get_scores.call_args_list`). `on_chat(body)`, while set, answers any other request it
    returns a reply for (an LLM whose answer depends on the prompt), ahead of the queue."""

    def __init__(self) -> None:
        super().__init__(chat_script=self._answer, chat_answer=NO_REPLY)
        self.get_scores: Callable[[str, list[str]], Sequence[float]] | None = None
        self.scores_calls: list[tuple[str, list[str]]] = []
        self.on_chat: Callable[[dict[str, Any]], Reply | None] | None = None
        # the replies wait here, not in the stub's own queue, which it would serve before `_answer`
        self._replies: deque[Reply] = deque()
        self._replies_lock = threading.Lock()

    def script(self, *replies: Reply) -> None:  # type: ignore[override]
        """Replace the queue of replies, and forget the requests recorded so far."""
        super().script()
        with self._replies_lock:
            self._replies = deque(replies)

    def reset(self) -> None:
        super().reset()
        with self._replies_lock:
            self._replies.clear()
        self.get_scores = None
        self.scores_calls = []
        self.on_chat = None

    def _answer(self, body: dict[str, Any]) -> Reply:
        scorer = self.get_scores
        if scorer is not None:
            parsed = rerank_prompt(body)
            if parsed is not None:
                self.scores_calls.append(parsed)
                return text(json.dumps({"scores": [float(s) for s in scorer(*parsed)]}))
        hook = self.on_chat
        reply = hook(body) if hook is not None else None
        if reply is not None:
            return reply
        with self._replies_lock:
            return self._replies.popleft() if self._replies else text(NO_REPLY)


# --- the LLM's view of an agent run ------------------------------------------------------------------------


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if content is None else str(content)


def agent_calls(stub: OpenAIStub) -> list[str]:
    """MindsDB's `mock_openai.agent_calls` (tests/unit/executor/test_agent.py @v25.14.1): for each chat request
    the LLM received, the text of the messages it had not seen in the request before (not its own replies)."""
    calls: list[str] = []
    seen = 0
    for request in stub.requests:
        if not request.path.endswith("/chat/completions"):
            continue
        messages = request.messages
        new: Iterable[Mapping[str, Any]] = messages[seen:] if seen <= len(messages) else messages
        calls.append("\n".join(_content(m) for m in new if m.get("role") != "assistant"))
        seen = len(messages)
    return calls


class MindsDBTestBase:
    """MindsDB's `BaseExecutorTest` over HTTP: a fresh server state, stubs and `run_sql`/`save_file` for each
    test (the executor agent and knowledge-base tests both derive from it)."""

    mdb: MindsDB
    embeddings: MindsDBEmbeddings
    llm: MindsDBLLM

    @pytest.fixture(autouse=True)
    def _fresh_mindsdb(
        self, mdb: MindsDB, mdb_embeddings: MindsDBEmbeddings, llm: MindsDBLLM
    ) -> Iterator[None]:
        mdb.reset()
        mdb_embeddings.reset()
        mdb_embeddings.set_embedding()
        llm.reset()
        self.mdb, self.embeddings, self.llm = mdb, mdb_embeddings, llm
        yield
        llm.reset()

    def run_sql(self, sql: str) -> pd.DataFrame | None:
        return self.mdb.run_sql(sql)

    def save_file(self, name: str, df: pd.DataFrame) -> None:
        self.mdb.save_file(name, df)
