"""The planner of SELECTs over several sources (`agentkb.sql.plan`) and the DuckDB step (`agentkb.sql.frames`);
pure, no server."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from mindsdb_sql_parser import parse_sql

from agentkb.errors import BadRequest
from agentkb.sql import frames, plan
from agentkb.sql.frames import Frame


def planned(sql: str, *kinds: str) -> plan.Plan:
    select = parse_sql(sql)
    leaves = plan.leaves(select.from_table)
    assert len(leaves) == len(kinds)
    return plan.Planner(select, {id(leaf): kind for leaf, kind in zip(leaves, kinds, strict=True)}).plan()


def text(node: Any) -> str | None:
    return None if node is None else str(node.to_string())


def test_conditions_go_to_their_source_and_join_values_to_the_data_source() -> None:
    p = planned(
        "select t.italian, k.id from kb_ral k join pg.demo.ral t on t.ral = k.id "
        "where k.content = 'white' and k.id not in (1, 2) and t.x > 1 and k.id = t.y limit 2",
        "kb",
        "datasource",
    )
    kb, ds = p.sources
    assert text(kb.where) == "k.content = 'white' AND k.id NOT IN (1, 2)"
    assert text(ds.where) == "t.x > 1"
    assert ds.join_in == ("ral", "k", "id")
    assert kb.limit is None  # a join: the search keeps its default size
    assert text(p.outer.where) == "k.id = t.y"
    sql = frames.to_duckdb(p.outer.to_string(), [s.key for s in p.sources])
    assert sql == "SELECT t.italian, k.id FROM t0 AS k JOIN t1 AS t ON t.ral = k.id WHERE k.id = t.y LIMIT 2"


def test_outer_joins_keep_the_conditions_of_their_nullable_side() -> None:
    p = planned(
        "select * from files.a x left join mindsdb.kb k on k.id = x.id where k.color = 'red' and k.content = 'q'",
        "files",
        "kb",
    )
    files, kb = p.sources
    assert kb.nullable and not files.nullable
    assert text(kb.where) == "k.color = 'red' AND k.content = 'q'"
    assert text(p.outer.where) == "k.color = 'red'"  # content is no column of the fetched rows


def test_a_lone_kb_gets_the_limit_of_a_search_but_not_of_a_sorted_listing() -> None:
    searched = planned("select * from kb where content = 'x' order by id limit 3 offset 2", "kb")
    assert searched.sources[0].limit == 5 and searched.outer.where is None
    listing = planned("select * from kb order by id limit 3", "kb")
    assert listing.sources[0].limit is None
    grouped = planned("select color, count(*) from kb where content = 'x' group by color limit 3", "kb")
    assert grouped.sources[0].limit is None


def test_agents_answer_their_partner_rows_last() -> None:
    p = planned(
        "select * from files.q t join my_agent a on a.question = t.q where t.q = '' limit 4", "files", "agent"
    )
    files, agent = p.sources
    assert agent.kind == "agent" and agent.question == ("t", "q") and files.limit == 4
    first = planned("select * from my_agent a join files.q t", "agent", "files")
    assert [s.kind for s in first.sources] == ["files", "agent"]
    assert first.sources[1].question == ("t", "question")
    assert "ON a.question = t.question" in first.outer.to_string()
    with pytest.raises(BadRequest, match="Join the agent"):
        planned("select * from files.q t join my_agent a on a.answer = t.q", "files", "agent")


def test_names_are_requalified_to_aliases() -> None:
    p = planned("select mindsdb.kb.id, f.x from mindsdb.kb join files.f on f.id = kb.id", "kb", "files")
    assert p.outer.to_string().startswith("SELECT kb.id, f.x FROM t0 AS kb JOIN t1 AS f ON f.id = kb.id")


def test_refusals() -> None:
    with pytest.raises(BadRequest, match="own name"):
        planned("select * from kb join kb on 1 = 1", "kb", "kb")
    with pytest.raises(BadRequest, match="Subqueries in conditions"):
        planned("select * from files.a x join kb k on 1=1 where k.id in (select 1)", "files", "kb")


def test_frames_type_columns_from_their_values() -> None:
    left = Frame(
        ["id", "n", "when", "metadata", "mixed", "empty"],
        [
            [1, 1.5, dt.date(2000, 1, 2), {"k": [1, 2]}, 1, None],
            [2, 2, dt.date(2000, 1, 3), None, "a", None],
        ],
    )
    right = Frame(["id", "id"], [[1, "x"], [3, "y"]])
    out = frames.query(
        {"a": left, "b": right},
        "SELECT a.*, b.id_1 FROM a JOIN b ON a.id = b.id WHERE a.\"when\" > DATE '2000-01-01' "
        "AND a.metadata ->> '$.k[0]' = '1'",
    )
    assert out.columns == ["id", "n", "when", "metadata", "mixed", "empty", "id_1"]
    assert out.rows == [[1, 1.5, dt.date(2000, 1, 2), {"k": [1, 2]}, "1", None, "x"]]


def test_frames_filter_on_load_and_errors() -> None:
    frame = Frame(["q"], [["hi"], [""], [None]])
    out = frames.query({"x": frame}, 'SELECT * FROM "x"', {"x": ("t", "t.q <> ''")})
    assert out.rows == [["hi"]]
    with pytest.raises(BadRequest, match="nope"):
        frames.query({"x": frame}, "SELECT nope FROM x")
