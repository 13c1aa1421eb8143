"""Table-driven tests for the knowledge-base SELECT parser (pure; no database)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from mindsdb_sql_parser import parse_sql

from agentkb.errors import BadRequest
from agentkb.kb.filters import Filter
from agentkb.service.retrieval.search import options_from_query
from agentkb.sql.kbquery import KBQuery, parse_kb_select, parse_kb_select_ast, strip_wrappers

BASE = KBQuery(
    project="mindsdb",
    kb="my_kb",
    columns=None,
    content=None,
    filters=(),
    relevance_threshold=None,
    limit=None,
    offset=None,
    hybrid_search=None,
    hybrid_search_alpha=None,
    reranking=None,
    order_by=(),
)


def q(**changes: Any) -> KBQuery:
    return replace(BASE, **changes)


def f(key: str, op: Any, value: Any) -> Filter:
    return Filter(key, op, value)


OK_CASES: list[tuple[str, KBQuery]] = [
    # the SDK's find() form
    ("SELECT * FROM mindsdb.my_kb WHERE content = 'flats' LIMIT 10", q(content="flats", limit=10)),
    # bare KB name takes the default project
    ("select * from my_kb where content = 'x'", q(content="x")),
    ("SELECT * FROM other.my_kb", q(project="other")),
    ("select * from my_kb where chunk_content = 'x'", q(content="x")),
    ("select * from my_kb where content like 'x%'", q(content="x")),  # MindsDB strips ' %'
    ("select * from my_kb where chunk_content like '%x y% '", q(content="x y")),
    ("select * from my_kb where CONTENT = 'x'", q(content="x")),
    # quotes and escapes
    ("select * from my_kb where content = 'it''s'", q(content="it's")),
    ("select * from my_kb where content = 'it\\'s'", q(content="it's")),
    ("select * from my_kb where content = \"say 'hi'\"", q(content="say 'hi'")),
    # metadata filters, one per operator
    ("select * from my_kb where author = 'x'", q(filters=(f("author", "=", "x"),))),
    ("select * from my_kb where author != 'x'", q(filters=(f("author", "!=", "x"),))),
    ("select * from my_kb where author <> 'x'", q(filters=(f("author", "!=", "x"),))),
    ("select * from my_kb where year < 2000", q(filters=(f("year", "<", 2000),))),
    ("select * from my_kb where year <= 2000", q(filters=(f("year", "<=", 2000),))),
    ("select * from my_kb where year > 1.5", q(filters=(f("year", ">", 1.5),))),
    ("select * from my_kb where year >= -3", q(filters=(f("year", ">=", -3),))),
    ("select * from my_kb where tag in ('a', 'b', 3)", q(filters=(f("tag", "in", ("a", "b", 3)),))),
    ("select * from my_kb where tag in ('a')", q(filters=(f("tag", "in", ("a",)),))),
    ("select * from my_kb where tag not in ('a', 'b')", q(filters=(f("tag", "not in", ("a", "b")),))),
    ("select * from my_kb where title like '%rent%'", q(filters=(f("title", "like", "%rent%"),))),
    ("select * from my_kb where title not like 'a%'", q(filters=(f("title", "not like", "a%"),))),
    ("select * from my_kb where tag is null", q(filters=(f("tag", "is null", None),))),
    ("select * from my_kb where tag is not null", q(filters=(f("tag", "is not null", None),))),
    ("select * from my_kb where tag = null", q(filters=(f("tag", "is null", None),))),
    (
        "select * from my_kb where ok = true and bad is false",
        q(filters=(f("ok", "=", True), f("bad", "=", False))),
    ),
    ("select * from my_kb where year between 1 and 2", q(filters=(f("year", ">=", 1), f("year", "<=", 2)))),
    ("select * from my_kb where x = 1e3", q(filters=(f("x", "=", 1000.0),))),
    # key spellings: metadata->>'k', metadata.k, qualified by the KB name or alias, reversed comparisons
    ("select * from my_kb where metadata->>'author' = 'x'", q(filters=(f("author", "=", "x"),))),
    ("select * from my_kb where metadata.author = 'x'", q(filters=(f("author", "=", "x"),))),
    ("select * from my_kb where my_kb.author = 'x'", q(filters=(f("author", "=", "x"),))),
    (
        "select * from mindsdb.my_kb k where k.metadata.author = 'x' and mindsdb.my_kb.y = 1",
        q(filters=(f("author", "=", "x"), f("y", "=", 1))),
    ),
    ("select * from my_kb where 2000 < year", q(filters=(f("year", ">", 2000),))),
    (
        "select * from my_kb where id = 'A1' and chunk_id = 'A1:notes:1of1:0to20'",
        q(filters=(f("id", "=", "A1"), f("chunk_id", "=", "A1:notes:1of1:0to20"))),
    ),
    ("select * from my_kb where `Mixed Key` = 1", q(filters=(f("Mixed Key", "=", 1),))),
    # relevance threshold
    ("select * from my_kb where content = 'x' and relevance >= 0.5", q(content="x", relevance_threshold=0.5)),
    ("select * from my_kb where content = 'x' and relevance > 0", q(content="x", relevance_threshold=0.0)),
    ("select * from my_kb where content = 'x' and relevance >= 1", q(content="x", relevance_threshold=1.0)),
    ("select * from my_kb where 0.25 <= relevance", q(relevance_threshold=0.25)),
    # MindsDB flags
    ("select * from my_kb where content = 'x' and reranking = false", q(content="x", reranking=False)),
    (
        "select * from my_kb where content = 'x' and hybrid_search = true and hybrid_search_alpha = 0.7",
        q(content="x", hybrid_search=True, hybrid_search_alpha=0.7),
    ),
    (
        "select * from my_kb where reranking = 1 and hybrid_search = 'false'",
        q(reranking=True, hybrid_search=False),
    ),
    # LLM wrappers
    ("```sql\nSELECT * FROM my_kb WHERE content = 'x' LIMIT 3\n```", q(content="x", limit=3)),
    ("```\nSELECT * FROM my_kb LIMIT 3;\n```", q(limit=3)),
    ("Thought: search\n$START$ SELECT * FROM my_kb WHERE content = 'x' $STOP$ trailing", q(content="x")),
    ("$START$```sql\nselect * from my_kb\n```$STOP$", q()),
    # column lists
    ("select id, chunk_content, relevance from my_kb", q(columns=("id", "chunk_content", "relevance"))),
    ("select my_kb.* from my_kb", q()),
    ("select k.id, k.metadata.author from mindsdb.my_kb as k", q(columns=("id", "author"))),
    (
        "select id as i, metadata->>'author' as author, chunk_content from my_kb",
        q(columns=("id", "author", "chunk_content"), column_names=("i", "author", "chunk_content")),
    ),
    (
        "select ID, metadata, distance, author, metadata.year, metadata->>'t' from my_kb",
        q(columns=("id", "metadata", "distance", "author", "year", "t")),
    ),
    # limit, offset, order by
    ("select * from my_kb limit 0", q(limit=0)),
    ("select * from my_kb where content = 'x' limit 500 offset 20", q(content="x", limit=500, offset=20)),
    ("select * from my_kb limit 20, 5", q(limit=5, offset=20)),
    (
        "select * from my_kb order by relevance desc, metadata.year asc, id",
        q(order_by=(("relevance", True), ("year", False), ("id", False))),
    ),
]


@pytest.mark.parametrize(("sql", "expected"), OK_CASES, ids=[c[0][:60] for c in OK_CASES])
def test_parse_ok(sql: str, expected: KBQuery) -> None:
    assert parse_kb_select(sql, "mindsdb") == expected


def test_no_default_project() -> None:
    assert parse_kb_select("select * from kb").project is None
    assert parse_kb_select("select * from p.kb").project == "p"


def test_params_are_bound() -> None:
    got = parse_kb_select(
        "select * from kb where content = :q and year in (:a, 2) and tag = :t",
        params={"q": "x", "a": 1, "t": "z"},
    )
    assert got.content == "x" and got.filters == (Filter("year", "in", (1, 2)), Filter("tag", "=", "z"))
    with pytest.raises(BadRequest, match="= needs a single value"):
        parse_kb_select("select * from kb where tag = :t", params={"t": [1, 2]})


def test_ast_entry_point() -> None:
    ast = parse_sql("select * from kb where content = 'x' and relevance >= 0.5")
    assert parse_kb_select_ast(ast, "mindsdb") == replace(BASE, kb="kb", content="x", relevance_threshold=0.5)


def test_result_is_hashable() -> None:
    hash(parse_kb_select("select * from kb where tag in ('a', 'b')"))


def test_strip_wrappers_keeps_backticked_names() -> None:
    assert strip_wrappers("select * from `my kb`") == "select * from `my kb`"
    assert strip_wrappers("```select * from kb```") == "select * from kb"


BAD_CASES: list[tuple[str, str]] = [
    ("", "Empty query"),
    ("```sql\n```", "Empty query"),
    ("DELETE FROM kb WHERE id = 1", "Only SELECT queries are supported on a knowledge base, got DELETE"),
    ("SHOW TABLES", "got SHOW"),
    ("select * from a union select * from b", "got UNION"),
    ("select * from kb; select * from kb2", "Only a single sql statement"),
    ("select * from a join b on a.x = b.y", "Joins are not supported"),
    ("select * from a, b", "Joins are not supported"),
    ("select * from (select * from kb) t", "Subqueries are not supported"),
    ("select * from kb where id in (select id from t)", "Subqueries are not supported"),
    ("select 1", "no FROM clause"),
    ("select * from a.b.c", "Invalid knowledge base name a.b.c"),
    ("select * from kb where content = 'x' or author = 'y'", "OR is not supported in this version"),
    ("select * from kb where (a = 1 or b = 2) and c = 3", "OR is not supported in this version"),
    ("select * from kb where not a = 1", "NOT is not supported in this version"),
    ("select * from kb where content != 'x'", "content != is not supported yet"),
    ("select * from kb where content <> 'x'", "content != is not supported yet"),
    ("select * from kb where content not like 'x'", "content NOT LIKE is not supported yet"),
    ("select * from kb where content in ('a', 'b')", "content IN is not supported yet"),
    ("select * from kb where content not in ('a')", "content NOT IN is not supported yet"),
    ("select * from kb where content = 'a' and content = 'b'", "Only one content condition"),
    ("select * from kb where content = null", "content IS NULL is not supported yet"),
    ("select * from kb where content = true", "content must be compared with a string"),
    ("select * from kb where relevance = 0.5", "relevance = is not supported: use relevance >= x"),
    ("select * from kb where relevance < 0.5", "relevance < is not supported"),
    ("select * from kb where relevance >= 1.5", "relevance must be a number between 0 and 1, got 1.5"),
    ("select * from kb where relevance > -0.1", "relevance must be a number between 0 and 1, got -0.1"),
    ("select * from kb where relevance >= 'high'", "relevance must be a number between 0 and 1"),
    ("select * from kb where relevance >= 0.1 and relevance > 0.2", "Only one relevance condition"),
    ("select * from kb limit -1", "LIMIT must be a non-negative integer, got -1"),
    ("select * from kb limit 1.5", "LIMIT must be an integer value"),
    ("select * from kb where reranking = 'maybe'", "reranking must be true or false"),
    ("select * from kb where reranking != true", "reranking can only be set with ="),
    ("select * from kb where hybrid_search_alpha = 2", "hybrid_search_alpha must be a number between 0"),
    ("select * from kb where reranking = true and reranking = false", "reranking is given more than once"),
    ("select * from kb where distance < 0.3", "Filtering on distance is not supported"),
    ("select * from kb where metadata = 'x'", "Compare a metadata key"),
    ("select * from kb where a = b", "Expected a literal value"),
    ("select * from kb where a.b.c = 1", "Unknown column a.b.c"),
    ("select * from kb where metadata->>1 = 1", "Unsupported JSON access"),
    ("select * from kb where a = (1, 2)", "Expected a literal value"),
    ("select * from kb where a in 1", "IN needs a list of values"),
    ("select * from kb where a like 3", "LIKE needs a string pattern"),
    ("select * from kb where a <=> 1", "Operator <=> is not supported"),
    ("select * from kb where a is 3", "IS needs NULL, TRUE or FALSE"),
    ("select * from kb where content = :q", "Unbound query parameter :q"),
    ("select * from kb where content = ?", "Positional ? parameters are not supported"),
    ("select count(*) from kb", "Unsupported column count(*)"),
    ("select x.* from kb", "Unknown column x.*"),
    ("select *, id from kb", "SELECT * cannot be combined"),
    ("select reranking from kb", "reranking is not a column"),
    ("select distinct id from kb", "DISTINCT is not supported"),
    ("select id from kb group by id", "GROUP BY is not supported"),
    ("with t as (select 1) select * from kb", "WITH is not supported"),
    ("select * from kb order by id desc nulls last", "NULLS FIRST / NULLS LAST is not supported"),
    ("select * from kb order by 1", "ORDER BY supports columns only"),
    ("select * from kb wher x = 1", "Invalid SQL"),
    ("select * from kb where content = 'x' and", "Invalid SQL"),
    ("select * frm kb", "no FROM clause"),  # parser quirk: reads as `* AS kb`
]


@pytest.mark.parametrize(("sql", "message"), BAD_CASES, ids=[c[0][:60] or "empty" for c in BAD_CASES])
def test_parse_refused(sql: str, message: str) -> None:
    with pytest.raises(BadRequest) as info:
        parse_kb_select(sql, "mindsdb")
    assert message in info.value.detail
    assert info.value.status == 400


def test_ast_entry_point_refuses_non_select() -> None:
    with pytest.raises(BadRequest, match="got DELETE"):
        parse_kb_select_ast(parse_sql("delete from kb where id = 1"), None)


@pytest.mark.parametrize(
    ("where", "hybrid", "alpha"),
    [
        ("content = 'x'", False, 0.5),  # MindsDB: hybrid_search_alpha defaults to 1, a vector search
        ("content = 'x' and hybrid_search = false", False, 0.5),
        ("content = 'x' and hybrid_search = true", True, 0.5),
        ("content = 'x' and hybrid_search_alpha = 0.7", True, 0.7),
        ("content = 'x' and hybrid_search = false and hybrid_search_alpha = 0.2", True, 0.2),
    ],
)
def test_sql_search_is_vector_unless_asked(where: str, hybrid: bool, alpha: float) -> None:
    options = options_from_query(parse_kb_select(f"select * from my_kb where {where}", "mindsdb"))
    assert (options.hybrid, options.alpha) == (hybrid, alpha)
