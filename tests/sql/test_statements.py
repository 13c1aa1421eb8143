"""The parsed-statement cache: a cached parse is the parser's own answer, and each caller's copy is its own."""

from __future__ import annotations

import pytest
from mindsdb_sql_parser import ast, parse_sql

from agentkb.sql.statements import StatementCache

SAME_SHAPE = [
    "SELECT * FROM mindsdb.kb WHERE content = 'first query' LIMIT 10",
    "SELECT * FROM mindsdb.kb WHERE content = 'another, longer query text' LIMIT 10",
    "SELECT * FROM mindsdb.kb WHERE content = '' LIMIT 10",
]


@pytest.mark.parametrize(
    "sql",
    [
        *SAME_SHAPE,
        "SELECT * FROM kb WHERE content LIKE '%x%' AND topic = 'a' AND n > 3",
        "SELECT 'a' AS x, 'b' AS y FROM files.t",
        "SELECT * FROM kb WHERE content = 'it''s'",  # an escape: parsed as it is
        "SELECT * FROM kb WHERE content = 'a\\'b'",
        "SELECT * FROM \"kb\" WHERE content = 'x'",
        "SELECT * FROM kb WHERE content = :q",
        "SELECT * FROM kb -- 'comment'\nWHERE content = 'x'",
        "INSERT INTO kb (content) VALUES ('x')",
    ],
)
def test_a_cached_parse_is_the_parsers_answer(sql: str) -> None:
    cache = StatementCache()
    for _ in range(3):  # the miss, then hits
        assert cache.parse(sql) == parse_sql(sql)


def test_one_shape_is_parsed_once_and_each_copy_is_independent() -> None:
    cache = StatementCache()
    first = cache.parse(SAME_SHAPE[0])
    assert len(cache._shapes) == 1
    later = [cache.parse(sql) for sql in SAME_SHAPE[1:]]
    assert len(cache._shapes) == 1 and list(cache._shapes.values())[0] is not None
    assert [str(s) for s in later] == [str(parse_sql(sql)) for sql in SAME_SHAPE[1:]]
    assert isinstance(first, ast.Select)
    first.where.args[1].value = "changed by a caller"  # a handler may mutate its tree
    assert cache.parse(SAME_SHAPE[0]) == parse_sql(SAME_SHAPE[0])


def test_the_cache_is_bounded() -> None:
    cache = StatementCache(size=2)
    for n in range(5):
        cache.parse(f"SELECT * FROM kb WHERE content = 'x' LIMIT {n + 1}")
    assert len(cache._shapes) == 2


def test_a_statement_the_parser_refuses_still_raises() -> None:
    with pytest.raises(Exception):  # noqa: B017, PT011 - the parser's own error types
        StatementCache().parse("SELECT * FROM kb WHERE content = 'x' AND AND")


def test_an_agents_kb_queries_are_parsed_once_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """`parse_kb_statement` (the agent's `kb_query_tool`, `parse_kb_select`) goes through a shape cache: the
    parser runs for the first statement of a shape only, and each answer is the parser's own, a copy of
    its own."""
    from agentkb.sql import kbquery, statements

    calls: list[str] = []

    def counting(sql: str) -> ast.ASTNode:
        calls.append(sql)
        return parse_sql(sql)

    monkeypatch.setattr(kbquery, "_STATEMENTS", StatementCache())
    monkeypatch.setattr(statements, "parse_sql", counting)
    trees = [kbquery.parse_kb_statement(f"```sql\n{sql}\n```") for sql in SAME_SHAPE]
    assert trees == [parse_sql(sql) for sql in SAME_SHAPE]
    assert len(calls) == 2  # the first statement and its shape; the other two from the cache
    trees[1].limit = ast.Constant(99)
    assert kbquery.parse_kb_statement(SAME_SHAPE[1]) == parse_sql(SAME_SHAPE[1])
