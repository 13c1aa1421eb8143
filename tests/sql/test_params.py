"""`:name` / `@name` binding (`agentkb.sql.params`) and MindsDB's `parametrize_constants` (`agentkb.sql.parametrize`)."""

from __future__ import annotations

from typing import Any

import pytest
from mindsdb_sql_parser import parse_sql

from agentkb.errors import BadRequest
from agentkb.sql.parametrize import parametrize
from agentkb.sql.params import bind, needs_binding


@pytest.mark.parametrize(
    ("sql", "params", "bound"),
    [
        ("select :x from t where a = :a", {"x": 1, "a": "v"}, "SELECT 1 FROM t WHERE a = 'v'"),
        ("select * from t where a in :l", {"l": ["p", "q"]}, "SELECT * FROM t WHERE a IN ('p', 'q')"),
        ("select * from t where a = :n", {"n": None}, "SELECT * FROM t WHERE a = NULL"),
        ("select * from t where a = :A", {"a": 2}, "SELECT * FROM t WHERE a = 2"),  # names: any case
        ("select :x as y from t", {"x": True}, "SELECT TRUE AS y FROM t"),
        ("delete from kb where id = :id", {"id": 7}, "DELETE FROM kb WHERE id = 7"),
        (
            "select * from t where a = (select max(b) from u where c = :c)",
            {"c": 3},
            "SELECT * FROM t WHERE a = (SELECT max(b) FROM u WHERE c = 3)",
        ),
        ("update t set a = :a where b = :b", {"a": "x", "b": 1}, "update t set a='x' where b = 1"),
    ],
)
def test_parameters_become_constants(sql: str, params: dict[str, Any], bound: str) -> None:
    assert bind(parse_sql(sql), params).to_string() == bound


def test_variables_fill_option_values() -> None:
    statement = parse_sql(
        "CREATE DATABASE d WITH ENGINE = 'postgres', PARAMETERS = {'user': @db_user, 'nested': {'password': @pw}}"
    )
    bind(statement, {"db_user": "me", "pw": "pw"})
    assert statement.parameters == {"user": "me", "nested": {"password": "pw"}}  # type: ignore[attr-defined]
    kb = parse_sql("CREATE KNOWLEDGE_BASE kb USING embedding_model = {'provider': 'openai', 'api_key': @key}")
    bind(kb, {"key": "sk-1"})
    assert kb.params["embedding_model"]["api_key"] == "sk-1"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("sql", "params", "message"),
    [
        ("select :x from t", {}, "Parameter is not set: x"),
        ("select * from t where a = ?", {"?": 1}, "Parameter is not set: ?"),
        ("select * from t where a = :a and b = :b", {"a": 1}, "Parameter is not set: b"),
        (
            "CREATE DATABASE d WITH ENGINE = 'sqlite', PARAMETERS = {'db_file': @path}",
            None,
            "Variable path is not defined",
        ),
    ],
)
def test_unbound_names_are_mindsdbs_errors(sql: str, params: dict[str, Any] | None, message: str) -> None:
    with pytest.raises(BadRequest, match=message.replace("?", r"\?")):
        bind(parse_sql(sql), params)


def test_system_variables_and_plain_statements_are_left_alone() -> None:
    assert not needs_binding("SELECT * FROM kb WHERE content = 'x' LIMIT 3", None)
    assert needs_binding("SELECT * FROM kb WHERE content = 'a:b'", None)  # a cheap pre-check only
    assert bind(parse_sql("SELECT * FROM kb WHERE content = 'a:b'"), None).to_string().endswith("'a:b'")
    assert bind(parse_sql("select @@version"), {}).to_string() == "SELECT @@version"


def test_parametrize_names_and_numbers() -> None:
    out = parametrize(
        "select a from db1.t join db2.u on t.x = u.y where t.p = 1 and u.p = 2 and q between 3 and 4"
    )
    assert (
        out.query
        == "SELECT a FROM db1.t JOIN db2.u ON t.x = u.y WHERE t.p = :p AND u.p = :p2 AND q BETWEEN :q AND :q2"
    )
    assert [p["name"] for p in out.parameters] == ["p", "p2", "q", "q2"]
    assert out.databases == {"db2": ["u"], "db1": ["t"]}
    assert parametrize("select 1.5, 'x' as label from t").parameters == [
        {"name": "param", "value": 1.5, "type": "float"},
        {"name": "label", "value": "x", "type": "str"},
    ]
    with pytest.raises(BadRequest, match="Invalid SQL"):
        parametrize("select from where")
