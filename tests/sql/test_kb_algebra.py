"""MindsDB's KB WHERE algebra (`agentkb.sql.kb_algebra`): condition trees, and the searches a WHERE becomes
(pure; the searches are recorded by a fake)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mindsdb_sql_parser import parse_sql

from agentkb.errors import BadRequest
from agentkb.kb.search import Hit
from agentkb.sql import kb_algebra
from agentkb.sql.kb_algebra import Block, SearchCall
from agentkb.sql.kbquery import condition_parser


def tree(where: str) -> Any:
    select = parse_sql(f"select * from kb where {where}")
    _, _, parser = condition_parser(select, "mindsdb")
    return kb_algebra.condition_tree(select.where, parser)


def hit(chunk: str, relevance: float | None = None) -> Hit:
    return Hit(chunk, chunk, f"text {chunk}", {}, None if relevance is None else 1 - relevance, relevance)


class FakeKB:
    """Answers each search from a table: content text (or None) → chunk ids; records the calls."""

    def __init__(self, answers: dict[str | None, list[str]]) -> None:
        self.answers = answers
        self.calls: list[SearchCall] = []

    async def __call__(self, call: SearchCall) -> list[Hit]:
        self.calls.append(call)
        excluded: set[str] = set()
        for key, op, value in call.conditions:
            if key == "chunk_id" and op == "not in":
                excluded.update(value)
        found = [c for c in self.answers.get(call.content, []) if c not in excluded]
        return [hit(c, 0.9 - i / 100) for i, c in enumerate(found)][: call.limit or None]


def run(where: str, answers: dict[str | None, list[str]], limit: int | None = None, offset: int = 0) -> Any:
    kb = FakeKB(answers)
    hits = asyncio.run(kb_algebra.run(tree(where), kb, limit, offset))
    return [h.chunk_id for h in hits], kb.calls


TREES = [
    ("a = 1 and b = 2", Block("and", (("a", "=", 1), ("b", "=", 2)))),
    ("a = 1 or (b = 2 or c = 3)", Block("or", (("a", "=", 1), ("b", "=", 2), ("c", "=", 3)))),
    ("not a = 1", ("a", "!=", 1)),
    ("not (a = 1 and b < 2)", Block("or", (("a", "!=", 1), ("b", ">=", 2)))),
    ("not content = 'x'", ("content", "!=", "x")),
    ("content = not 'x'", ("content", "!=", "x")),
    ("not content in ('x')", ("content", "not in", ("x",))),
    ("n between 1 and 3", Block("and", (("n", ">=", 1), ("n", "<=", 3)))),
    ("not n between 1 and 3", Block("or", (("n", "<", 1), ("n", ">", 3)))),
    ("content is not null", ("content", "is not null", None)),
]


@pytest.mark.parametrize(("where", "expected"), TREES, ids=[t[0] for t in TREES])
def test_condition_trees(where: str, expected: Any) -> None:
    assert tree(where) == expected


@pytest.mark.parametrize(
    ("where", "simple"),
    [
        ("content = 'x' and a = 1 and reranking = false", True),
        ("a = 1", True),
        ("content like 'x'", True),
        ("content = 'x' and content = 'y'", False),
        ("content != 'x'", False),
        ("content in ('x', 'y')", False),
        ("a = 1 or b = 2", False),
        ("(a = 1 or b = 2) and c = 3", False),
    ],
)
def test_is_simple(where: str, simple: bool) -> None:
    assert kb_algebra.is_simple(tree(where)) is simple


def test_not_on_a_flag_is_refused() -> None:
    with pytest.raises(BadRequest, match="NOT cannot be applied"):
        tree("not reranking = true")


def test_positive_contents_of_an_and_block_are_one_search() -> None:
    ids, calls = run("content in ('green', 'white') and content not like '%green%'", {
        "green": ["g1", "g2"],
        "green AND white": ["g1", "w1", "w2"],
    }, limit=3)  # fmt: skip
    assert ids == ["w1", "w2"]
    negative, positive = calls
    assert negative == SearchCall("green", (("relevance", ">=", 0.5),), 100, disable_reranking=True)
    assert positive.content == "green AND white" and positive.limit == 3
    assert positive.conditions == (("chunk_id", "not in", ("g1", "g2")),)


def test_lone_content_in_is_a_union_of_searches() -> None:
    ids, calls = run("content in ('a', 'b') and size = 'big'", {"a": ["1", "2"], "b": ["2", "3"]})
    assert ids == ["1", "2", "3"]
    assert [c.content for c in calls] == ["a", "b"]
    assert all(c.conditions == (("size", "=", "big"),) for c in calls)


def test_or_blocks_are_unions_and_limit_applies_to_the_whole() -> None:
    ids, calls = run(
        "(content = 'green' and size = 'big') or (content = 'white' and size = 'small') or content is null",
        {"green": ["g1", "g2"], "white": ["w1"]},
        limit=2,
    )
    assert len(ids) == 2 and len(calls) == 2  # IS NULL searches nothing
    assert calls[0].conditions == (("size", "=", "big"),) and calls[0].limit == 2


def test_negative_content_alone_lists_what_survives() -> None:
    ids, calls = run("content != 'x' and a = 1", {"x": ["1"], None: ["1", "2"]}, limit=5)
    assert ids == ["2"]
    assert calls[1] == SearchCall(None, (("a", "=", 1), ("chunk_id", "not in", ("1",))), 5)


def test_is_not_null_matches_everything_and_offset_slices() -> None:
    ids, calls = run("content = 'x' and content is not null", {"x": ["1", "2", "3"]}, limit=1, offset=1)
    assert ids == ["2"] and len(calls) == 1 and calls[0].limit == 2


def test_and_of_or_blocks_intersects() -> None:
    ids, _ = run("(a = 1 or a = 2) and (content = 'x')", {None: ["1", "2"], "x": ["2", "3"]})
    assert ids == ["2"]
