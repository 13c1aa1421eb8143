"""Planning a SELECT over several sources, or one that a source cannot answer alone (pure; no I/O).

MindsDB's planner, reduced to what agentkb serves: each table of the FROM clause (a knowledge base, an agent,
an uploaded file, a data-source table, a subquery, a native query) is fetched on its own, with the WHERE
conditions that name only it pushed down to it (a KB's `content = …`, `relevance >= …` and flags among them);
then the statement runs over the fetched rows in DuckDB (`frames`). As MindsDB:

- a data-source table joined by equality to a table fetched before it is fetched with `col IN (<values>)`;
- an agent joined to a table answers one question per row: `JOIN agent a ON a.question = t.col` (or the
  table's own `question` column when there is no ON);
- a lone KB with a content search and no grouping gets the statement's LIMIT (+ OFFSET) as its search limit
  (MindsDB's top-k, then ORDER BY within it); otherwise a content search keeps its default 10 rows.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from mindsdb_sql_parser import ast

from agentkb.errors import BadRequest

KB_SPECIAL = frozenset({"content", "relevance", "reranking", "hybrid_search", "hybrid_search_alpha"})
AGGREGATES = frozenset(
    {"count", "sum", "avg", "min", "max", "group_concat", "string_agg", "array_agg", "stddev", "variance"}
)
MAX_IN_VALUES = 1000
_NULLABLE = {"LEFT JOIN": ("right",), "RIGHT JOIN": ("left",), "FULL JOIN": ("left", "right")}


@dataclass
class Source:
    key: str  # its table in DuckDB
    alias: str  # how the statement names it
    kind: str  # kb | agent | files | datasource | subquery | native
    node: Any  # the FROM leaf: Identifier, Select/Union (a subquery) or NativeQuery
    quals: list[tuple[str, ...]] = field(default_factory=list)  # lower-cased names that qualify its columns
    where: Any = None  # the conditions pushed down to it
    nullable: bool = False  # on the outer side of a LEFT/RIGHT/FULL join
    join_in: tuple[str, str, str] | None = None  # (its column, other alias, other column): `col IN (...)`
    question: tuple[str, str] | None = None  # agent: (alias, column) of the questions
    limit: int | None = None  # KB: the search limit


@dataclass
class Plan:
    sources: list[Source]  # in the order to fetch them
    outer: ast.Select  # the statement over the sources' DuckDB tables


def leaves(node: Any) -> list[Any]:
    """The tables of a FROM clause, left to right."""
    if isinstance(node, ast.Join):
        return leaves(node.left) + leaves(node.right)
    return [node]


def conjuncts(node: Any) -> list[Any]:
    if node is None:
        return []
    if isinstance(node, ast.BinaryOperation) and node.op.lower() == "and":
        return conjuncts(node.args[0]) + conjuncts(node.args[1])
    return [node]


def conjoin(nodes: list[Any]) -> Any:
    out = None
    for node in nodes:
        out = node if out is None else ast.BinaryOperation(op="and", args=[out, node])
    return out


def walk(node: Any) -> list[Any]:
    """Every AST node under `node` (subqueries excluded)."""
    out = [node]
    if isinstance(node, (ast.Select, ast.Union, ast.Intersect, ast.Except)):
        return out
    for value in vars(node).values() if isinstance(node, ast.ASTNode) else ():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, ast.ASTNode):
                out += walk(item)
    return out


def is_grouped(select: ast.Select) -> bool:
    if select.group_by or select.having or select.distinct:
        return True
    return any(
        isinstance(n, ast.Function) and str(n.op).lower() in AGGREGATES
        for t in select.targets
        for n in walk(t)
    )


def _alias(node: Any, index: int) -> str:
    if getattr(node, "alias", None) is not None:
        return str(node.alias.parts[-1])
    if isinstance(node, ast.Identifier):
        return str(node.parts[-1])
    if isinstance(node, ast.NativeQuery):
        return str(node.integration.parts[-1])
    return f"t{index}"


def _quals(node: Any, alias: str) -> list[tuple[str, ...]]:
    quals: list[tuple[str, ...]] = [(alias.lower(),)]
    if isinstance(node, ast.Identifier):
        parts = [str(p).lower() for p in node.parts]
        quals += [tuple(parts[i:]) for i in range(len(parts))]
    return sorted(set(quals), key=len, reverse=True)


class Planner:
    def __init__(self, select: ast.Select, kinds: dict[int, str]) -> None:
        """`kinds`: the kind of each FROM leaf, keyed by `id(leaf)`."""
        self.select = select
        self.sources: list[Source] = []
        self.by_leaf: dict[int, Source] = {}
        for i, leaf in enumerate(leaves(select.from_table)):
            alias = _alias(leaf, i)
            source = Source(f"t{i}", alias, kinds[id(leaf)], leaf, _quals(leaf, alias))
            self.sources.append(source)
            self.by_leaf[id(leaf)] = source
        aliases = [s.alias.lower() for s in self.sources]
        if len(set(aliases)) != len(aliases):
            raise BadRequest("Each table of the query needs its own name: give them aliases (… AS t)")

    def owner(self, ident: ast.Identifier) -> tuple[Source, list[str]] | None:
        parts = [str(p) for p in ident.parts]
        lowered = tuple(p.lower() for p in parts)
        for source in self.sources:
            for q in source.quals:
                if len(lowered) > len(q) and lowered[: len(q)] == q:
                    return source, parts[len(q) :]
        if len(self.sources) == 1:
            return self.sources[0], parts
        return None

    def owners(self, node: Any) -> set[int] | None:
        """The sources a condition names (by index); None when a column cannot be placed."""
        found: set[int] = set()
        for n in walk(node):
            if isinstance(n, (ast.Select, ast.Union, ast.Intersect, ast.Except)) and n is not node:
                raise BadRequest("Subqueries in conditions are not supported: join the tables instead")
            if isinstance(n, ast.Identifier):
                owned = self.owner(n)
                if owned is None:
                    return None
                found.add(self.sources.index(owned[0]))
        return found

    def plan(self) -> Plan:
        self._joins(self.select.from_table)
        kept = [c for c in conjuncts(self.select.where) if self._push(c)]
        self._agents(self.select.from_table)
        self._limit(kept)
        outer = copy.deepcopy(self.select)
        outer.from_table = self._rebuild(self.select.from_table)
        outer.where = conjoin([copy.deepcopy(c) for c in kept])
        outer.cte = None
        for node in walk_all(outer):
            if isinstance(node, ast.Identifier):
                self._requalify(node)
        order = [s for s in self.sources if s.kind != "agent"] + [
            s for s in self.sources if s.kind == "agent"
        ]
        return Plan(order, outer)

    def _limit(self, kept: list[Any]) -> None:
        """Push LIMIT (+ OFFSET) down where MindsDB does: a lone KB's content search, and the table whose
        rows an agent answers."""
        select = self.select
        if not isinstance(select.limit, ast.Constant) or is_grouped(select):
            return
        offset = select.offset.value if isinstance(select.offset, ast.Constant) else 0
        limit = int(select.limit.value) + int(offset or 0)
        if len(self.sources) == 1 and self.sources[0].kind == "kb":
            kb = self.sources[0]
            searched = any(
                isinstance(n, ast.Identifier) and str(n.parts[-1]).lower() in ("content", "chunk_content")
                for n in walk(kb.where)
            )
            if searched or not select.order_by:
                kb.limit = limit
        agents = [s for s in self.sources if s.kind == "agent"]
        if len(self.sources) == 2 and len(agents) == 1 and not kept and not select.order_by:
            partner = next(s for s in self.sources if s.kind != "agent")
            if partner.kind != "kb":
                partner.limit = limit

    # --- conditions -----------------------------------------------------------------------------------
    def _push(self, condition: Any) -> bool:
        """Push a WHERE conjunct down to its one source; True when the outer statement keeps it too."""
        names = self.owners(condition)
        if names is None or len(names) != 1:
            return True
        source = self.sources[names.pop()]
        if source.kind == "agent":
            return True
        source.where = conjoin([c for c in (source.where, condition) if c is not None])
        special = source.kind == "kb" and any(
            isinstance(n, ast.Identifier) and str(n.parts[-1]).lower() in KB_SPECIAL for n in walk(condition)
        )
        return source.nullable and not special

    def _joins(self, node: Any) -> None:
        if not isinstance(node, ast.Join):
            return
        self._joins(node.left)
        self._joins(node.right)
        join_type = " ".join(str(node.join_type or "JOIN").upper().replace("OUTER", "").split())
        for side in _NULLABLE.get(join_type, ()):
            for leaf in leaves(getattr(node, side)):
                self.by_leaf[id(leaf)].nullable = True
        right = self.by_leaf.get(id(node.right))
        if (
            right is None
            or right.kind != "datasource"
            or join_type not in ("JOIN", "INNER JOIN", "LEFT JOIN")
        ):
            return
        before = {id(self.by_leaf[id(leaf)]) for leaf in leaves(node.left)}
        for condition in conjuncts(node.condition):
            pair = self._equality(condition)
            if pair is None:
                continue
            (a, col_a), (b, col_b) = pair
            if a is right and id(b) in before and b.kind != "agent":
                right.join_in = (col_a, b.alias, col_b)
                return
            if b is right and id(a) in before and a.kind != "agent":
                right.join_in = (col_b, a.alias, col_a)
                return

    def _equality(self, condition: Any) -> tuple[tuple[Source, str], tuple[Source, str]] | None:
        if not (isinstance(condition, ast.BinaryOperation) and condition.op == "="):
            return None
        sides = []
        for arg in condition.args:
            owned = self.owner(arg) if isinstance(arg, ast.Identifier) else None
            if owned is None or len(owned[1]) != 1:
                return None
            sides.append((owned[0], owned[1][0]))
        return sides[0], sides[1]

    def _agents(self, node: Any) -> None:
        if not isinstance(node, ast.Join):
            return
        self._agents(node.left)
        self._agents(node.right)
        for side, other in (("left", "right"), ("right", "left")):
            agent = self.by_leaf.get(id(getattr(node, side)))
            if agent is None or agent.kind != "agent" or agent.question is not None:
                continue
            for condition in conjuncts(node.condition):
                pair = self._equality(condition)
                for (a, col_a), (b, col_b) in (pair, pair[::-1]) if pair else ():
                    if a is agent and col_a.lower() == "question" and b is not agent:
                        agent.question = (b.alias, col_b)
            partner = leaves(getattr(node, other))
            if agent.question is None and node.condition is None and len(partner) == 1:
                partner_source = self.by_leaf[id(partner[0])]
                agent.question = (partner_source.alias, "question")
                node.condition = ast.BinaryOperation(
                    op="=",
                    args=[
                        ast.Identifier(parts=[agent.alias, "question"]),
                        ast.Identifier(parts=[partner_source.alias, "question"]),
                    ],
                )
            if agent.question is None:
                raise BadRequest(
                    f"Join the agent {agent.alias} on its question: … JOIN <agent> AS a ON a.question = "
                    "t.<column>"
                )

    # --- the outer statement ----------------------------------------------------------------------------
    def _rebuild(self, node: Any) -> Any:
        if isinstance(node, ast.Join):
            return ast.Join(
                join_type=node.join_type,
                left=self._rebuild(node.left),
                right=self._rebuild(node.right),
                condition=copy.deepcopy(node.condition),
                implicit=node.implicit,
            )
        source = self.by_leaf[id(node)]
        return ast.Identifier(parts=[source.key], alias=ast.Identifier(source.alias))

    def _requalify(self, ident: ast.Identifier) -> None:
        """`project.kb.col` / `kb.col` → `<alias>.col`, so DuckDB finds the column."""
        if len(ident.parts) < 2:
            return
        owned = self.owner(ident)
        if owned is not None and len(owned[1]) < len(ident.parts):
            ident.parts = [owned[0].alias, *owned[1]]


def walk_all(node: Any) -> list[Any]:
    """Every AST node under `node`, FROM subqueries excluded (they are sources)."""
    out = [node]
    items = vars(node).items() if isinstance(node, ast.ASTNode) else ()
    for name, value in items:
        if name in ("from_table", "cte"):
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, ast.ASTNode):
                out += walk_all(item)
    if isinstance(node, ast.Select) and isinstance(node.from_table, ast.Join):
        out += _join_conditions(node.from_table)
    return out


def _join_conditions(node: Any) -> list[Any]:
    if not isinstance(node, ast.Join):
        return []
    out = _join_conditions(node.left) + _join_conditions(node.right)
    return out + (walk_all(node.condition) if node.condition is not None else [])
