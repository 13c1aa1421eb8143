"""`EVALUATE KNOWLEDGE_BASE` (SQL), `POST …/knowledge_bases/{kb}/evaluate` and `GET …/evaluations` (REST), and
`agentkb evaluate` (CLI), over real HTTP with the OpenAI stub as both the embedder and the LLM.

The stub's LLM writes, for each text it is given, the question "<the text>" (so a search finds that text's
document first: the stub's vectors are text hashes), and scores passages for `llm_relevancy` by whether
they contain the query."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ServedApp
from tests.helpers import assert_problem, stub_kb
from tests.openai_stub import OpenAIStub, Reply, text
from tests.test_sql_api import ok, sql, table

DOCS = {
    "a1": "Aluminium melts at 660 degrees Celsius.",
    "b2": "The Danube flows through ten countries.",
    "c3": "Basalt is an igneous rock from lava.",
    "d4": "Photosynthesis turns light into chemical energy.",
}
MINDSDB_COLUMNS = ["total", "total_found", "retrieved_in_top_10", "cumulative_recall", "avg_query_time"]


def _llm(body: dict[str, Any]) -> Reply:
    content = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
    if content.startswith("Rate how well each passage"):
        query = re.search(r"^Query: (.*)$", content, re.MULTILINE)
        passages = re.findall(r"^Passage \d+: (.*)$", content, re.MULTILINE)
        wanted = query.group(1) if query else ""
        return text(json.dumps({"scores": [0.9 if p == wanted else 0.1 for p in passages]}))
    found = re.search(r"Text:\n(.*?)\n\n", content, re.DOTALL)
    passage = found.group(1) if found else ""
    return text(f'```json\n{{"query": {json.dumps(passage)}, "reference_answer": "yes"}}\n```')


@pytest.fixture(scope="module")
def stub() -> Iterator[OpenAIStub]:
    with OpenAIStub(chat_script=_llm) as server:
        yield server


@pytest.fixture()
def kb(client: httpx.Client, unique: str, stub: OpenAIStub) -> str:
    name = f"ev_{unique}"
    stub_kb(client, name, stub)
    values = ", ".join(f"('{doc_id}', '{content}')" for doc_id, content in DOCS.items())
    ok(client, f"INSERT INTO {name} (id, content) VALUES {values}")
    return name


def llm_sql(stub: OpenAIStub) -> str:
    return json.dumps(stub.chat_model("gpt-eval"))


def one_row(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["type"] == "table", answer
    assert len(answer["data"]) == 1, answer
    return dict(zip(answer["column_names"], answer["data"][0], strict=True))


def test_generate_and_evaluate_in_sql(client: httpx.Client, kb: str, unique: str, stub: OpenAIStub) -> None:
    stub.script()
    answer = sql(
        client,
        f"""EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.t_{unique}, generate_data = true,
            llm = {llm_sql(stub)}, save_to = files.r_{unique}""",
    )
    assert answer["column_names"][:5] == MINDSDB_COLUMNS
    assert answer["column_names"][-3:] == ["id", "name", "created_at"]
    row = one_row(answer)
    assert row["total"] == len(DOCS) and row["total_found"] == len(DOCS) and row["retrieved_in_top_10"] == 4
    assert json.loads(row["cumulative_recall"]) == {str(i): 1.0 for i in range(20)}
    assert row["mrr"] == 1.0 and json.loads(row["hit_at_k"])["1"] == 1.0
    assert row["name"] == kb
    chats = [r for r in stub.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == len(DOCS) and {r.body["model"] for r in chats} == {"gpt-eval"}
    assert (
        chats[0].messages[0]["role"] == "system"
        and "question and answer pairs" in chats[0].messages[0]["content"]
    )

    # MindsDB's test-data columns, in files.<test_table>
    test_rows = table(client, f"SELECT * FROM files.t_{unique}")
    assert {tuple(sorted(r)) for r in test_rows} == {("answer", "doc_id", "question", "text")}
    assert {r["doc_id"]: r["question"] for r in test_rows} == DOCS
    assert all(r["answer"] == "yes" and r["text"] == r["question"] for r in test_rows)

    # evaluate the stored test table again, without generating; save_to appends
    again = one_row(
        sql(
            client,
            f"EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.t_{unique}, save_to = files.r_{unique}",
        )
    )
    assert again["total"] == row["total"] and again["id"] > row["id"]
    saved = table(client, f"SELECT * FROM files.r_{unique}")
    assert [r["id"] for r in saved] == [row["id"], again["id"]] and saved[0]["total_found"] == 4

    # the runs are stored, newest first, with per-question results
    runs = client.get(f"/api/projects/mindsdb/knowledge_bases/{kb}/evaluations").json()
    assert [r["id"] for r in runs] == [again["id"], row["id"]] and runs[0]["results"] is None
    full = client.get(f"/api/projects/mindsdb/knowledge_bases/{kb}/evaluations/{row['id']}").json()
    assert (
        full["params"]["llm"]["api_key"] == "******" and full["params"]["test_table"] == f"files.t_{unique}"
    )
    assert len(full["results"]) == 4 and full["results"][0]["doc_found"] is True
    assert full["results"][0]["doc_position"] == 0 and full["metrics"]["total"] == 4


def test_generate_only_from_sql(client: httpx.Client, kb: str, unique: str, stub: OpenAIStub) -> None:
    rows = [{"content": c, "id": i} for i, c in DOCS.items()]
    r = client.put(
        f"/api/files/src_{unique}", files={"file": ("src.json", json.dumps(rows), "application/json")}
    )
    assert r.status_code == 200, r.text
    answer = sql(
        client,
        f"""EVALUATE KNOWLEDGE_BASE mindsdb.{kb} USING test_table = files.t_{unique},
            generate_data = {{'from_sql': 'select content, id from files.src_{unique}', 'count': 2}},
            llm = {llm_sql(stub)}, evaluate = false""",
    )
    assert answer["type"] == "table" and answer["data"] == []  # MindsDB: an empty answer
    assert len(table(client, f"SELECT * FROM files.t_{unique}")) == 2
    assert client.get(f"/api/projects/mindsdb/knowledge_bases/{kb}/evaluations").json() == []
    # generated again: the test table is replaced, not appended to
    sql(
        client,
        f"""EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.t_{unique}, evaluate = false,
            generate_data = {{'from_sql': 'select content, id from files.src_{unique}', 'count': 3}},
            llm = {llm_sql(stub)}""",
    )
    assert len(table(client, f"SELECT * FROM files.t_{unique}")) == 3
    no_content = sql(
        client,
        f"""EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.t_{unique}, llm = {llm_sql(stub)},
            generate_data = {{'from_sql': 'select id from files.src_{unique}'}}""",
    )
    assert no_content["type"] == "error" and "`content` column isn't found" in no_content["error_message"]


def test_given_test_table_with_several_relevant_documents(client: httpx.Client, kb: str, unique: str) -> None:
    """BEIR-style judgements: a doc_id list; recall@k counts the share of them found."""
    tests = [
        {"question": DOCS["a1"], "doc_id": ["a1", "c3"]},  # a1 first, c3 somewhere in the 4
        {"question": DOCS["b2"], "doc_id": "b2"},
        {"question": "zzz unrelated", "doc_id": "nope"},
    ]
    r = client.put(
        f"/api/files/q_{unique}", files={"file": ("q.json", json.dumps(tests), "application/json")}
    )
    assert r.status_code == 200, r.text
    row = one_row(
        sql(client, f"EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.q_{unique}, top_k = 10")
    )
    assert row["total"] == 3 and row["total_found"] == 2
    assert len(json.loads(row["cumulative_recall"])) == 10
    assert json.loads(row["hit_at_k"]) == {"1": 0.6667, "3": 0.6667, "5": 0.6667, "10": 0.6667}
    recall = json.loads(row["recall_at_k"])
    assert recall["1"] == 0.5 and recall["10"] == 0.6667  # (1/2 + 1 + 0) / 3, then (1 + 1 + 0) / 3
    assert row["mrr"] == 0.6667


def test_llm_relevancy(client: httpx.Client, kb: str, unique: str, stub: OpenAIStub) -> None:
    tests = [{"question": DOCS["c3"], "answer": "lava"}, {"question": DOCS["d4"], "answer": "light"}]
    r = client.put(
        f"/api/files/q_{unique}", files={"file": ("q.json", json.dumps(tests), "application/json")}
    )
    assert r.status_code == 200, r.text
    row = one_row(
        sql(
            client,
            f"""EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.q_{unique}, version = 'llm_relevancy',
                llm = {llm_sql(stub)}""",
        )
    )
    assert row["mean_mrr"] == 1.0 and row["avg_first_relevant_position"] == 0
    assert row["hit_at_k"] == [1.0] * 4 and row["bin_precision_at_k"][:2] == [1.0, 0.5]
    assert row["avg_relevance_score_by_k"] == [0.9, 0.1, 0.1, 0.1]
    assert 0 < row["avg_ndcg"] <= 1 and row["name"] == kb


def test_without_any_llm_questions_are_sentences_of_the_chunks(
    client: httpx.Client, kb: str, unique: str, stub: OpenAIStub
) -> None:
    """No `llm`, no reranking model, the default model the keyless `extractive` one: each question is the
    richest sentence of its chunk (no LLM called), and the search finds the chunk it came from."""
    stub.script()
    row = one_row(
        sql(client, f"EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.t_{unique}, generate_data = true")
    )
    assert row["total"] == len(DOCS) and row["total_found"] == len(DOCS) and row["mrr"] == 1.0
    assert not [r for r in stub.requests if r.path.endswith("/chat/completions")]
    test_rows = table(client, f"SELECT * FROM files.t_{unique}")
    assert {r["doc_id"]: r["question"] for r in test_rows} == DOCS
    assert all(r["answer"] == r["question"] == r["text"] for r in test_rows)

    # several sentences: the one with the most distinct words, the same every time
    long_kb = f"evs_{unique}"
    stub_kb(client, long_kb, stub)
    text_ = "Intro. The Rhine rises in the Swiss Alps and reaches the North Sea. Short line here."
    ok(client, f"INSERT INTO {long_kb} (id, content) VALUES ('r1', '{text_}')")
    for _ in range(2):
        answer = sql(
            client,
            f"""EVALUATE KNOWLEDGE_BASE {long_kb} USING test_table = files.s_{unique}, evaluate = false,
                generate_data = {{'count': 5}}""",
        )
        assert answer["type"] == "table", answer
        assert table(client, f"SELECT question, doc_id FROM files.s_{unique}") == [
            {"question": "The Rhine rises in the Swiss Alps and reaches the North Sea.", "doc_id": "r1"}
        ]

    # llm_relevancy needs an LLM to score passages: refused before the test table is written
    error = sql(
        client,
        f"""EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.n_{unique}, generate_data = true,
            version = 'llm_relevancy'""",
    )
    assert error["type"] == "error"
    assert "'extractive'" in error["error_message"] and "llm =" in error["error_message"]
    assert "does not exist" in sql(client, f"SELECT * FROM files.n_{unique}")["error_message"]


@pytest.fixture(scope="module")
def default_llm_url(settings: Any, stub: OpenAIStub) -> Iterator[str]:
    """An agentkb whose default model (AGENTKB_DEFAULT_MODEL) is the stub's LLM, on the session's database."""
    own = settings.model_copy(
        update={"default_model": stub.chat_model("gpt-default"), "worker_enabled": False}
    )
    with ServedApp(own) as app:
        yield app.url


def test_no_llm_given_uses_the_default_model(
    client: httpx.Client, kb: str, unique: str, stub: OpenAIStub, default_llm_url: str
) -> None:
    """MindsDB: no `llm` and no reranking model → the default LLM settings write the questions."""
    stub.script()
    with httpx.Client(base_url=default_llm_url, timeout=60) as other:
        row = one_row(
            sql(
                other,
                f"""EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.d_{unique},
                    generate_data = {{'count': 3}}""",
            )
        )
    assert row["total"] == 3 and row["total_found"] == 3
    chats = [r for r in stub.requests if r.path.endswith("/chat/completions")]
    assert len(chats) == 3 and {r.body["model"] for r in chats} == {"gpt-default"}
    assert "question and answer pairs" in chats[0].messages[0]["content"]
    assert all(r["answer"] == "yes" for r in table(client, f"SELECT * FROM files.d_{unique}"))


def test_refusals(client: httpx.Client, kb: str, unique: str, pg_source: dict[str, Any]) -> None:
    cases = {
        f"EVALUATE KNOWLEDGE_BASE {kb} USING evaluate = true": '"test_table" parameter',
        f"EVALUATE KNOWLEDGE_BASE {kb} USING test_table = t_{unique}": "at least 2 parts",
        f"EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.t, colour = 'red'": "Unknown EVALUATE parameter",
        f"EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.t, version = 'v9'": "not implemented: v9",
        f"EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.missing_{unique}": "does not exist",
        f"EVALUATE KNOWLEDGE_BASE nokb_{unique} USING test_table = files.t": "Knowledge Base with name",
    }
    for statement, message in cases.items():
        answer = sql(client, statement)
        assert answer["type"] == "error" and message in answer["error_message"], (statement, answer)
    wrong = [{"query": "x", "id": 1}]
    r = client.put(
        f"/api/files/w_{unique}", files={"file": ("w.json", json.dumps(wrong), "application/json")}
    )
    assert r.status_code == 200
    answer = sql(client, f"EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.w_{unique}")
    assert (
        answer["type"] == "error"
        and "must contain 'question' and 'doc_id' columns" in answer["error_message"]
    )
    # results are written to files only
    ok(client, f"CREATE DATABASE pg_{unique} WITH ENGINE = 'postgres', PARAMETERS = {pg_source!r}")
    tests = [{"question": "x", "doc_id": "a1"}]
    client.put(f"/api/files/q_{unique}", files={"file": ("q.json", json.dumps(tests), "application/json")})
    answer = sql(
        client, f"EVALUATE KNOWLEDGE_BASE {kb} USING test_table = files.q_{unique}, save_to = pg_{unique}.res"
    )
    assert answer["type"] == "error" and "files.<name> only" in answer["error_message"]
    ok(client, f"DROP DATABASE pg_{unique}")


def test_rest(client: httpx.Client, kb: str, unique: str, stub: OpenAIStub) -> None:
    base = f"/api/projects/mindsdb/knowledge_bases/{kb}"
    r = client.post(
        f"{base}/evaluate",
        json={"test_table": f"files.t_{unique}", "generate_data": {"count": 2}, "llm": stub.chat_model()},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["generated"] == 2 and body["test_table"] == f"files.t_{unique}"
    run = body["evaluation"]
    assert run["metrics"]["total"] == 2 and run["metrics"]["total_found"] == 2 and len(run["results"]) == 2
    assert run["version"] == "doc_id" and run["params"]["top_k"] == 20 and run["knowledge_base"] == kb
    assert client.get(f"{base}/evaluations/{run['id']}").json()["metrics"] == run["metrics"]
    only = client.post(f"{base}/evaluate", json={"test_table": f"files.t_{unique}", "evaluate": False})
    assert only.status_code == 200 and only.json() == {
        "generated": None,
        "test_table": f"files.t_{unique}",
        "evaluation": None,
    }
    extractive = client.post(  # no LLM anywhere: questions from the chunks' sentences
        f"{base}/evaluate", json={"test_table": f"files.x_{unique}", "generate_data": True}
    )
    assert extractive.status_code == 200 and extractive.json()["generated"] == len(DOCS), extractive.text
    assert_problem(
        client.post(
            f"{base}/evaluate",
            json={"test_table": f"files.t_{unique}", "generate_data": True, "version": "llm_relevancy"},
        ),
        400,
    )
    assert_problem(client.post(f"{base}/evaluate", json={"test_table": "files.t", "top_k": 0}), 400)
    assert_problem(client.get(f"{base}/evaluations/999999999"), 404)
    assert_problem(client.get(f"/api/projects/mindsdb/knowledge_bases/no_{unique}/evaluations"), 404)
    # a KB's runs go with it
    assert client.delete(base).status_code in (200, 204)
    stub_kb(client, kb, stub)
    assert client.get(f"{base}/evaluations").json() == []


def agentkb(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "agentkb", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_cli(client: httpx.Client, kb: str, unique: str, base_url: str, tmp_path: Path) -> None:
    questions = tmp_path / "qa.csv"
    questions.write_text("question,doc_id\n" + "".join(f'"{c}",{i}\n' for i, c in DOCS.items()))
    evaluate = ["evaluate", kb, "--server", base_url, "--test-table", f"files.qa_{unique}"]
    run = agentkb(*evaluate, "--questions", str(questions))
    assert run.returncode == 0, run.stderr
    assert f"of {kb} (doc_id)" in run.stdout and "total_found" in run.stdout
    assert re.search(r"│ 1\s+│ 1\.0000\s+│ 1\.0000\s+│ 1\.0000\s+│", run.stdout), (
        run.stdout
    )  # hit, recall, mrr at 1
    # uploading again replaces the file
    again = agentkb(*evaluate, "--questions", str(questions), "--json")
    assert again.returncode == 0, again.stderr
    run_id = json.loads(again.stdout)["evaluation"]["id"]
    listed = agentkb("evaluate", kb, "--server", base_url, "--list", "--json")
    assert [r["id"] for r in json.loads(listed.stdout)][0] == run_id
    shown = agentkb("evaluate", kb, "--server", base_url, "--show", str(run_id))
    assert shown.returncode == 0 and "4 questions" in shown.stdout and DOCS["b2"][:30] in shown.stdout
    generated = agentkb(
        "evaluate", kb, "--server", base_url, "--test-table", f"files.g_{unique}", "--generate"
    )
    assert generated.returncode == 0 and "4 questions written" in generated.stdout, generated.stderr


def test_the_kbs_reranking_model_writes_the_questions(
    client: httpx.Client, unique: str, stub: OpenAIStub
) -> None:
    """MindsDB: no `llm` → the KB's reranking model (stored sealed: revealed to be used); the search reranks."""
    name = f"evr_{unique}"
    kb = {
        "name": name,
        "embedding_model": stub.embedding_model(),
        "reranking_model": stub.chat_model("gpt-rr"),
    }
    assert (
        client.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": kb}).status_code == 201
    )
    values = ", ".join(f"('{doc_id}', '{content}')" for doc_id, content in DOCS.items())
    ok(client, f"INSERT INTO {name} (id, content) VALUES {values}")
    stub.script()
    row = one_row(
        sql(
            client,
            f"EVALUATE KNOWLEDGE_BASE {name} USING test_table = files.t_{unique}, generate_data = true",
        )
    )
    assert row["total"] == 4 and row["total_found"] == 4
    chats = [r for r in stub.requests if r.path.endswith("/chat/completions")]
    assert {r.body["model"] for r in chats} == {"gpt-rr"} and chats[0].headers["authorization"] == "Bearer x"
    assert len(chats) == 8  # 4 questions written, 4 searches reranked
