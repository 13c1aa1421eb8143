"""Ported from MindsDB `tests/integration/flows/test_knowledge_base.py` @v26.1.0 (`TestKB.test_base_syntax`).

MindsDB runs it against a live server through `mindsdb_sdk`, with OpenAI embeddings and reranking
(`OPENAI_API_KEY`) and the public demo database `example_db` (samples.mindsdb.com, table demo.crm_demo). Here:

- `mindsdb_sdk` (3.5.0) talks to this module's agentkb, as in MindsDB's test (`con.query(sql).fetch()`);
- the embedding model (MindsDB: OpenAI's) is a bag of words served over HTTP (`word_embeddings`: a
  one-word content search finds the rows holding the word, as OpenAI's embeddings do; MindsDB's dummy
  embedder would put "not" nearest to "noise"), and the reranking model (MindsDB: `gpt-4`)
  is the scripted LLM scoring a passage 0.9 when it contains the searched word, else 0.1;
- `example_db` is a postgres data source (a scratch database in the suite's embedded PostgreSQL) whose
  `demo.crm_demo` holds 40 synthetic support messages (pk, message_body, status, category) shaped like the
  demo table;
- the test is split at its own section comments; every part after "test data ingestion" loads the 30 rows
  with a plain `INSERT … SELECT` (the partitioned insert is the first part's subject), and the parts after
  "insert values" also insert those values first, so each part shows its own gap.
- MindsDB's parametrisation is the configuration `default-openai-openai` (default storage, an embedding and a
  reranking model), the one it runs with a key.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from typing import Any

import mindsdb_sdk
import pandas as pd
import pytest

from tests.compat.mdb import MindsDBEmbeddings, MindsDBLLM, postgres_tables, word_embeddings

MESSAGES = {
    "Battery": "My battery drains very fast after the latest update",
    "Screen": "The screen flickers at low brightness",
    "Sound": "The speaker makes a loud noise when music plays",
    "Shipping": "My order has not arrived yet",
}
STATUSES = ("solving", "solved", "new")


def crm_demo() -> pd.DataFrame:
    rows = []
    for pk in range(1, 41):
        category = list(MESSAGES)[pk % 4]
        rows.append([pk, f"{MESSAGES[category]} (ticket {pk})", STATUSES[pk % 3], category])
    return pd.DataFrame(rows, columns=["pk", "message_body", "status", "category"])


@pytest.fixture(scope="module")
def example_db(base_url: str) -> dict[str, Any]:
    """MindsDB's `create_example_db`: connection parameters of the replica (schema `demo`)."""
    return postgres_tables({"crm_demo": crm_demo()}, schema="demo")


class TestKB:
    con: Any
    embeddings: MindsDBEmbeddings
    llm: MindsDBLLM

    @pytest.fixture(autouse=True)
    def _connect(
        self, base_url: str, example_db: dict[str, Any], mdb_embeddings: MindsDBEmbeddings, llm: MindsDBLLM
    ) -> Iterator[None]:
        self.con = mindsdb_sdk.connect(base_url)
        self.embeddings, self.llm = mdb_embeddings, llm
        mdb_embeddings.reset()
        mdb_embeddings.set_embedding()
        mdb_embeddings.use(word_embeddings)
        llm.reset()
        llm.get_scores = lambda query, docs: [0.9 if query.lower() in d.lower() else 0.1 for d in docs]
        self.create_example_db(example_db)
        yield
        llm.reset()

    def create_example_db(self, connection_args: dict[str, Any]) -> str:
        name = "example_db"

        try:
            self.con.databases.get(name)
            return name

        except AttributeError:
            pass

        self.con.databases.create(name, engine="postgres", connection_args=connection_args)
        return name

    def run_sql(self, sql: str) -> pd.DataFrame | None:
        return self.con.query(sql).fetch()

    def create_kb(
        self,
        name: str,
        embedding_model: dict[str, Any],
        reranking_model: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        #  -- drop kb --
        try:  # noqa: SIM105 (MindsDB's code)
            self.con.knowledge_bases.drop(name)
        except Exception:
            ...

        # prepare KB
        kb_params: dict[str, Any] = {
            "embedding_model": embedding_model,
        }
        if params is not None:
            kb_params.update(params)

        if reranking_model is not None:
            kb_params["reranking_model"] = reranking_model

        param_items = []
        for k, v in kb_params.items():
            param_items.append(f"{k}={json.dumps(v)}")
        param_str = ",".join(param_items)

        # Clean up any existing KB with the same name before creating
        self.run_sql(f"DROP KNOWLEDGE BASE IF EXISTS {name}")

        self.run_sql(f"""
            create knowledge base {name}
            using {param_str}
        """)

    # --- MindsDB's configuration `default-openai-openai`, served by the stubs -----------------------------

    kb_name = "test_default_kb_crm"

    def _create(self) -> None:
        # MindsDB: text-embedding-ada-002 (1536 dimensions); the stand-in's vectors have 625
        embedding_model = self.embeddings.mindsdb_model(model_name="dummy_model", api_key="sk-...")
        reranking_model = {"provider": "openai", "model_name": "gpt-4", "api_key": "sk-...",
                           "base_url": self.llm.base_url}  # fmt: skip
        self.create_kb(
            self.kb_name,
            embedding_model,
            reranking_model,
            params={
                "metadata_columns": ["status", "category"],
                "content_columns": ["message_body"],
                "id_column": "pk",
            },
        )

    def _load(self, count_rows: int = 30) -> None:
        """The 30 rows, without partitions (test_base_syntax's own load is test_base_syntax__ingestion)."""
        self._create()
        self.run_sql(f"""
            insert into {self.kb_name}
            select * from example_db.demo.crm_demo
            order by pk
            limit {count_rows}
        """)

    def _insert_values(self) -> None:
        for _ in range(2):
            # do it twice second time it will be updated
            self.run_sql(f"""
                insert into {self.kb_name} (pk, message_body) values
                (1000, 'Help'), (1001, 'Thank you'), (1002, 'Thank you')
            """)

    # ------------------------------------------------------------------------------------------------------

    def test_base_syntax__ingestion(self) -> None:
        """Section "Test data ingestion"."""
        kb_name = self.kb_name

        def to_date(s: str) -> dt.datetime:
            return dt.datetime.strptime(s, "%Y-%m-%d %H:%M:%S.%f")

        self._create()

        count_rows = 30
        ret = self.run_sql(f"""
            insert into {kb_name}
            select * from example_db.demo.crm_demo
            order by pk
            limit {count_rows}
            using batch_size=10, track_column=pk
        """)

        if "ID" not in ret.columns:
            raise RuntimeError("Query is not partitioned")

        duration = None
        for _ in range(100):  # 200 sec min max
            time.sleep(1)

            ret = self.run_sql(f"describe knowledge base {kb_name}")
            record = ret.iloc[0]

            if record["INSERT_FINISHED_AT"] is not None:
                duration = (
                    to_date(record["INSERT_FINISHED_AT"]) - to_date(record["INSERT_STARTED_AT"])
                ).seconds
                break

            if record["ERROR"] is not None:
                raise RuntimeError(record["ERROR"])
        if duration is None:
            raise RuntimeError("Timeout to finish query")

        ret = self.run_sql(f"select * from {kb_name}")
        assert len(ret) == count_rows

    def test_base_syntax__metadata(self) -> None:
        """Section "test metadata": metadata search."""
        self._load()
        kb_name = self.kb_name
        ret = self.run_sql(f"select * from {kb_name}")
        assert len(ret) == 30

        # -- Metadata search
        ret = self.run_sql(f"""
                SELECT *
                FROM {kb_name}
                WHERE category = "Battery";
            """)
        assert set(ret.metadata.apply(lambda x: x.get("category"))) == {"Battery"}

        ret = self.run_sql(f"""
                SELECT *
                FROM {kb_name}
                WHERE status = "solving" AND category = "Battery"
            """)
        assert set(ret.metadata.apply(lambda x: x.get("category"))) == {"Battery"}
        assert set(ret.metadata.apply(lambda x: x.get("status"))) == {"solving"}

    def test_base_syntax__content_and_metadata(self) -> None:
        """Sections "Content + metadata search with limit", "... and re-ranking threshold", "checking columns"."""
        self._load()
        kb_name = self.kb_name
        # -- Content + metadata search with limit
        ret = self.run_sql(f"""
                SELECT *
                FROM {kb_name}
                WHERE status = "solving" AND content = "noise" and reranking=false
                LIMIT 5;
            """)
        assert set(ret.metadata.apply(lambda x: x.get("status"))) == {"solving"}
        assert "noise" in ret.chunk_content[0]
        assert len(ret) == 5

        # -- Content + metadata search with limit and re-ranking threshold
        ret = self.run_sql(f"""
                SELECT *
                FROM {kb_name}
                WHERE status = "solving"
                 AND content = "noise"  AND reranking=false AND relevance>=0.5
            """)
        assert set(ret.metadata.apply(lambda x: x.get("status"))) == {"solving"}
        assert "noise" in ret.chunk_content[0]  # first line contents word
        assert len(ret[ret.relevance < 0.5]) == 0

        #  checking columns
        for column in ["id", "chunk_content", "metadata", "distance", "relevance"]:
            assert column in ret.columns, f"Column {column} does not exist in response"

    def test_base_syntax__like(self) -> None:
        """Section "like / not like" (MindsDB runs it for pgvector storage only: agentkb's storage is pgvector)."""
        self._load()
        kb_name = self.kb_name
        # like / not like
        ret = self.run_sql(f"select id, metadata, chunk_content from {kb_name} where category like '%ttery'")
        assert len([row for _, row in ret.iterrows() if "Battery" not in str(row["metadata"])]) == 0

        ret = self.run_sql(
            f"select id, metadata, chunk_content from {kb_name} where category not like '%ttery'"
        )
        assert len([row for _, row in ret.iterrows() if "Battery" in str(row["metadata"])]) == 0

    def test_base_syntax__insert_values(self) -> None:
        """Section "insert values": inserting the same ids twice updates rather than duplicates."""
        self._load()
        count_rows = 30
        self._insert_values()
        count_rows += 3

        ret = self.run_sql(f"select * from {self.kb_name}")
        assert len(ret) == count_rows

    def test_base_syntax__select_by_id(self) -> None:
        """Section "selecting by id" (the id keeps its integer type)."""
        self._load()
        self._insert_values()
        kb_name = self.kb_name

        ret = self.run_sql(f"select id, chunk_content from {kb_name} where id = 1001")
        assert len(ret) == 1
        assert ret["chunk_content"][0] == "Thank you"

        ret = self.run_sql(f"select id, chunk_content from {kb_name} where id != 1000 limit 4")
        assert len(ret) == 4
        assert 1000 not in ret["id"]

        # in, not in
        ret = self.run_sql(f"select id, chunk_content from {kb_name} where id in (1001, 1000)")
        assert len(ret) == 2
        assert set(ret["id"]) == {1000, 1001}

        ret = self.run_sql(
            f"select id, chunk_content from {kb_name} where id not in ('1001', '1000') limit 4"
        )
        assert len(ret) == 4
        assert "1000" not in list(ret["id"])

    def test_base_syntax__group_by(self) -> None:
        """Section "outer query"."""
        self._load()
        self._insert_values()
        kb_name = self.kb_name
        ret = self.run_sql(
            f"select chunk_content, count(1) count, max(id) max from {kb_name} where id > 999 "
            "group by chunk_content order by max(id) desc"
        )
        assert len(ret) == 2
        assert ret["max"][0] == 1002
        assert ret["count"][0] == 2
        assert ret["chunk_content"][0] == "Thank you"

    def test_base_syntax__join(self) -> None:
        """Section "join with table"."""
        self._load()
        self._insert_values()
        kb_name = self.kb_name
        ret = self.run_sql(f"""
            select k.chunk_content, t.message_body, k.id, t.pk
            from {kb_name} k
            join example_db.demo.crm_demo t on t.pk = k.id
            where k.content = 'Help' and k.id not in (1000, 1001, 1002)
              and k.reranking=false
            limit 4
        """)

        row = ret.iloc[0]
        assert row["chunk_content"] == row["message_body"]
        assert row["id"] == row["pk"]

    def test_base_syntax__delete(self) -> None:
        """Section "delete/update data": delete."""
        self._load()
        self._insert_values()
        kb_name = self.kb_name
        # delete
        self.run_sql(f"delete from {kb_name} where id = 1")
        ret = self.run_sql(f"select * from {kb_name} where id = 1")
        assert len(ret) == 0

        self.run_sql(f"delete from {kb_name} where id in (1001, 2)")
        ret = self.run_sql(f"select * from {kb_name} where id in (1001, 2)")
        assert len(ret) == 0

    def test_base_syntax__update(self) -> None:
        """Section "delete/update data": update."""
        self._load()
        self._insert_values()
        kb_name = self.kb_name
        # update
        ret = self.run_sql(f"select * from {kb_name} where id = 1002")
        chunk_id = ret["chunk_id"][0]

        self.run_sql(f"update {kb_name} set content = 'FINE' where chunk_id = '{chunk_id}'")
        ret = self.run_sql(f"select * from {kb_name} where id = 1002")
        assert len(ret) == 1
        assert ret["chunk_content"][0] == "FINE"

    def test_base_syntax__reranking(self) -> None:
        """Section "search with reranking"."""
        self._load()
        self._insert_values()
        kb_name = self.kb_name
        threshold = 0.4
        ret = self.run_sql(f"""
            SELECT *
            FROM {kb_name}
            WHERE status = "solving" AND content = "noise" AND relevance>={threshold}
        """)
        assert set(ret.metadata.apply(lambda x: x.get("status"))) == {"solving"}
        for item in ret.chunk_content:
            assert "noise" in item  # all lines line contents word

        assert len(ret[ret.relevance < threshold]) == 0

    def test_base_syntax__evaluate(self) -> None:
        """Section "evaluate". MindsDB's LLM generates the test questions, each from the text it is given; the
        scripted LLM does the same: its question is the sampled message itself. (A fixed question, say
        "noise", would find its document only when chance samples a noise ticket: MindsDB samples the rows
        at random, and the reranker keeps only the messages containing the question.)"""
        from tests.compat.stubs import Reply, text

        def question_from_text(body: dict[str, Any]) -> Reply | None:
            user = str(body["messages"][-1].get("content") or "")
            if "Text:\n" not in user:
                return None
            message = user.split("Text:\n", 1)[1].strip()
            return text(json.dumps({"query": message, "reference_answer": message.rsplit("(", 1)[-1][:-1]}))

        self._load()
        self.llm.on_chat = question_from_text
        kb_name = self.kb_name
        ret = self.run_sql(f"""
            Evaluate knowledge base {kb_name}
            using
              test_table = files.test_eval_{kb_name},
              generate_data = {{
                 'from_sql': 'SELECT message_body content, pk id FROM example_db.demo.crm_demo order by pk limit 30',
                 'count': 2
             }},
             evaluate=true
        """)
        # at least one found
        assert ret["total_found"][0] > 0
        test_df = self.run_sql(f"select * from files.test_eval_{kb_name}")
        assert len(test_df) == ret["total"][0]
