"""MindsDB's knowledge-base WHERE algebra (`KnowledgeBaseQueryExecutor`, mindsdb 26.1): a WHERE that one
search cannot express becomes several searches whose hits are combined (pure: searches run through `Search`).

- `NOT` is pushed into the comparisons (`NOT content = 'a'` is `content != 'a'`; De Morgan over AND/OR).
- AND/OR trees are flattened into blocks; an OR block is the union of its items' hits, an AND block their
  intersection (by chunk id).
- In an AND block, the content conditions: `content = / LIKE 'a'` and `content IN ('a', 'b')` are searched
  together, as one search for `'a AND b'` (as MindsDB joins them); `content != / NOT LIKE 'a'` and `content NOT
  IN (…)` exclude the chunks of those searches (top 100 with relevance >= 0.5, no reranking); the block's other
  conditions (metadata filters, flags) go with every search.
- A lone `content IN ('a', 'b')` is the union of one search per value.
- `content IS NULL` matches nothing, `content IS NOT NULL` everything (every chunk has content). (MindsDB
  answers IS NOT NULL with an unfiltered listing intersected with the rest: limited, so nearly empty.)
- An AND block with exclusions but no positive content lists the chunks that survive them (MindsDB fails).

Each search gets the statement's LIMIT (+ OFFSET); `run` applies OFFSET/LIMIT to the combined hits, ordered
by relevance where there are several searches (MindsDB leaves the union unlimited and in search order).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest
from agentkb.kb.search import Hit
from agentkb.sql.kbquery import CONTENT_COLUMNS, FLAG_COLUMNS, Condition, ConditionParser

NEGATIVE_SET_SIZE = 100  # MindsDB's _negative_set_size and _negative_set_threshold
NEGATIVE_SET_THRESHOLD = 0.5

_INVERT: dict[str, str] = {
    "=": "!=",
    "!=": "=",
    "<": ">=",
    ">=": "<",
    ">": "<=",
    "<=": ">",
    "in": "not in",
    "not in": "in",
    "like": "not like",
    "not like": "like",
    "is null": "is not null",
    "is not null": "is null",
}


@dataclass(frozen=True)
class Block:
    op: str  # "and" | "or"
    items: tuple[Tree, ...]


Tree = Condition | Block


@dataclass(frozen=True)
class SearchCall:
    """One search: its content text (None: a listing) and AND-ed other conditions (filters and flags)."""

    content: str | None
    conditions: tuple[Condition, ...]
    limit: int | None
    disable_reranking: bool = False


Search = Callable[[SearchCall], Awaitable[list[Hit]]]


def condition_tree(where: Any, parser: ConditionParser) -> Tree | None:
    """The WHERE as flattened AND/OR blocks of resolved conditions, NOT pushed down to the comparisons."""
    return None if where is None else _tree(where, parser, negate=False)


def _tree(node: Any, parser: ConditionParser, *, negate: bool) -> Tree:
    if isinstance(node, ast.UnaryOperation) and node.op.lower() == "not":
        return _tree(node.args[0], parser, negate=not negate)
    if isinstance(node, ast.BinaryOperation) and node.op.lower() in ("and", "or"):
        op = node.op.lower()
        if negate:
            op = "or" if op == "and" else "and"
        items: list[Tree] = []
        for arg in node.args:
            item = _tree(arg, parser, negate=negate)
            if isinstance(item, Block) and item.op == op:
                items.extend(item.items)
            else:
                items.append(item)
        return Block(op, tuple(items))
    if isinstance(node, ast.BetweenOperation):
        low, high = parser.between(node)
        return _tree_of((low, high), negate)
    if isinstance(node, ast.BinaryOperation) and len(node.args) == 2:
        if isinstance(node.args[1], ast.UnaryOperation) and node.args[1].op.lower() == "not":
            # `content <op> NOT value` (MindsDB's second form of NOT)
            node = ast.BinaryOperation(op=node.op, args=[node.args[0], node.args[1].args[0]])
            negate = not negate
        condition = parser.comparison(node)
        return _invert(condition) if negate else condition
    raise BadRequest(f"Unsupported condition: {node}")


def _tree_of(conditions: tuple[Condition, Condition], negate: bool) -> Tree:
    if not negate:
        return Block("and", conditions)
    return Block("or", tuple(_invert(c) for c in conditions))


def _invert(condition: Condition) -> Condition:
    key, op, value = condition
    if key in FLAG_COLUMNS or key == "relevance" or op not in _INVERT:
        raise BadRequest(f"NOT cannot be applied to the condition on {key}")
    if key in CONTENT_COLUMNS and op in ("<", "<=", ">", ">="):
        raise BadRequest(f"content {op} is not supported")
    return key, _INVERT[op], value  # type: ignore[return-value]


def is_simple(tree: Tree | None) -> bool:
    """True when one search answers the WHERE: AND-ed conditions with at most one `content =` / LIKE."""
    items: Sequence[Tree] = () if tree is None else tree.items if isinstance(tree, Block) else (tree,)
    if isinstance(tree, Block) and tree.op != "and":
        return False
    contents = 0
    for item in items:
        if isinstance(item, Block):
            return False
        if item[0] in CONTENT_COLUMNS:
            if item[1] not in ("=", "like"):
                return False
            contents += 1
    return contents <= 1


async def run(tree: Tree, search: Search, limit: int | None, offset: int) -> list[Hit]:
    """The hits of the WHERE `tree`, OFFSET and LIMIT applied."""
    wanted = None if limit is None else limit + offset
    executor = _Executor(search, wanted)
    hits, many = await executor.execute(tree)
    if many:
        hits = sorted(hits, key=lambda h: -h.relevance if h.relevance is not None else 1.0)
    return hits[offset:] if wanted is None else hits[offset:wanted]


def _union(results: Sequence[list[Hit]]) -> list[Hit]:
    seen: set[str] = set()
    out: list[Hit] = []
    for hits in results:
        for hit in hits:
            if hit.chunk_id not in seen:
                seen.add(hit.chunk_id)
                out.append(hit)
    return out


def _intersect(results: Sequence[list[Hit]]) -> list[Hit]:
    out = results[0]
    for other in results[1:]:
        keep = {h.chunk_id for h in other}
        out = [h for h in out if h.chunk_id in keep]
    return out


def _values(condition: Condition) -> list[str]:
    _, op, value = condition
    values = list(value) if op in ("in", "not in") else [value]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise BadRequest("content must be compared with a string, e.g. content = 'search text'")
    return [str(v).strip(" %") if op in ("like", "not like") else str(v) for v in values]


class _Executor:
    def __init__(self, search: Search, limit: int | None) -> None:
        self.search = search
        self.limit = limit

    async def execute(self, tree: Tree) -> tuple[list[Hit], bool]:
        """(hits, whether they come from several searches)."""
        if not isinstance(tree, Block):
            tree = Block("and", (tree,))
        if tree.op == "or":
            results = [(await self.execute(item))[0] for item in tree.items]
            return _union(results), len(results) > 1
        return await self._and(tree)

    async def _and(self, block: Block) -> tuple[list[Hit], bool]:
        results: list[list[Hit]] = []
        contents: list[Condition] = []
        others: list[Condition] = []
        for item in block.items:
            if isinstance(item, Block):
                results.append((await self.execute(item))[0])
            elif item[0] in CONTENT_COLUMNS:
                contents.append(item)
            else:
                others.append(item)
        lone_in = len(contents) == 1 and contents[0][1] == "in"
        include: list[str] = []
        exclude: set[str] = set()
        empty = False
        for key, op, value in contents:
            if op in ("!=", "not like", "not in"):
                exclude.update(await self._excluded((key, op, value), others))
            elif op in ("=", "like", "in"):
                include += [v for v in _values((key, op, value)) if v not in include]
            elif op == "is null":
                empty = True
            elif op != "is not null":
                raise BadRequest(f"content {op.upper()} is not supported: use =, LIKE, IN or their negations")
        if exclude:
            others.append(("chunk_id", "not in", tuple(sorted(exclude))))
        if empty:
            results.append([])
        elif lone_in:
            calls = [await self.search(SearchCall(v, tuple(others), self.limit)) for v in include]
            results.append(_union(calls))
        elif include:
            results.append(await self.search(SearchCall(" AND ".join(include), tuple(others), self.limit)))
        elif others or not results:
            results.append(await self.search(SearchCall(None, tuple(others), self.limit)))
        return _intersect(results), len(results) > 1 or (lone_in and len(include) > 1)

    async def _excluded(self, condition: Condition, others: list[Condition]) -> set[str]:
        """Chunk ids of the hits a negative content condition excludes (MindsDB's to_excluded_ids)."""
        kept = [c for c in others if c[0] != "relevance"]
        threshold: Condition = ("relevance", ">=", NEGATIVE_SET_THRESHOLD)
        ids: set[str] = set()
        for value in _values(condition):
            call = SearchCall(value, (*kept, threshold), NEGATIVE_SET_SIZE, disable_reranking=True)
            ids.update(h.chunk_id for h in await self.search(call))
        return ids
