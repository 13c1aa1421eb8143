"""Derived from MindsDB's documentation, `docs/mindsdb_sql/knowledge_bases/insert_data.mdx` @v26.1.0: the
`INSERT … USING kb_no_upsert / kb_skip_existing` options and duplicate ids within one insert. MindsDB's own
test suite has no test for these (at v26.1.0 `kb_no_upsert` occurs only in that page and in
`mindsdb/interfaces/knowledge_base/controller.py`), so these tests state what the page states, in the style of
the ported ones (SQL over `POST /api/sql/query`, MindsDB's dummy embedder, a postgres data source)."""

from __future__ import annotations

import pandas as pd

from tests.compat.test_mdb_executor_knowledge_base import BaseTestKB


def docs(rows: list[tuple[int, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["id", "content"])


class TestInsertOptions(BaseTestKB):
    def test_kb_no_upsert(self) -> None:
        """ "Skip duplicate checking (kb_no_upsert)": `INSERT INTO my_kb SELECT * FROM table_name USING
        kb_no_upsert = true` inserts directly (for an initial load into an empty KB)."""
        self.mdb.set_handler(
            "pg", tables={"docs": docs([(1, "green apple"), (2, "red cherry"), (3, "blue plum")])}
        )
        self._create_kb("my_kb")

        self.run_sql("INSERT INTO my_kb SELECT * FROM pg.docs USING kb_no_upsert = true")

        ret = self.run_sql("select * from my_kb")
        assert sorted(ret["id"]) == [1, 2, 3]

    def test_kb_skip_existing(self) -> None:
        """ "Skip existing items (kb_skip_existing)": existing items are skipped entirely, "including avoiding
        embedding calculation for existing content"; new ones are inserted."""
        self.mdb.set_handler(
            "pg",
            tables={
                "docs": docs([(1, "green apple"), (2, "red cherry")]),
                "docs2": docs([(1, "yellow banana"), (3, "blue plum")]),
            },
        )
        self._create_kb("my_kb")
        self.run_sql("INSERT INTO my_kb SELECT * FROM pg.docs")

        self.embeddings.reset()
        self.run_sql("INSERT INTO my_kb SELECT * FROM pg.docs2 USING kb_skip_existing = true")

        ret = self.run_sql("select * from my_kb where id = 1")
        assert list(ret["chunk_content"]) == ["green apple"]  # skipped, not updated
        ret = self.run_sql("select * from my_kb where id = 3")
        assert list(ret["chunk_content"]) == ["blue plum"]
        embedded = [t for r in self.embeddings.requests for t in r.body["input"]]
        assert "yellow banana" not in embedded

    def test_duplicate_ids_in_one_insert(self) -> None:
        """ "Case 2": rows with the same id in one insert: "only one of these rows is inserted"."""
        self._create_kb("my_kb", id_column="id", content_columns=["name"])
        self.run_sql("INSERT INTO my_kb (id, name, age) VALUES (1, 'Alice', 25), (1, 'Bob', 30)")

        ret = self.run_sql("select * from my_kb")
        assert len(ret) == 1
