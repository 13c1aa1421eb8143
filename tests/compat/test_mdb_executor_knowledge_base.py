"""Ported from MindsDB `tests/unit/executor/test_knowledge_base.py` @v26.1.0 (the newest tag that has it).

The SQL is MindsDB's, sent to agentkb's `POST /api/sql/query`; the assertions are MindsDB's. What changed to
run over HTTP (see tests/compat/mdb.py):

- `@patch(...LLMClient)` + `set_embedding(mock)` → the embedding model of every KB points at
  `MindsDBEmbeddings`, an OpenAI-compatible server answering with MindsDB's own `dummy_embeddings`
  (whatever provider the test named: MindsDB's patch made the provider irrelevant too).
- `@patch(...BaseLLMReranker.get_scores)` → the reranking model points at the scripted LLM, which answers
  reranking requests with `get_scores(query, docs)`.
- `_create_kb` no longer creates a `duckdb_faiss` storage database (agentkb keeps chunks in its own
  PostgreSQL; `storage=` is refused with a 400 naming it).
- Where MindsDB reads its own database (`self.db.KnowledgeBase.query`), the KB record of
  `GET /api/projects/mindsdb/knowledge_bases/{kb}` and the requests the stubs received are read instead.
- Long tests are split at MindsDB's own section comments so that each missing capability shows on its own;
  each part names the MindsDB test it comes from.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pandas as pd
import pytest

from tests.compat.mdb import MindsDB, MindsDBEmbeddings, MindsDBTestBase, P

DESCRIBE = "DESCRIBE KNOWLEDGE_BASE is refused (Unsupported statement: Describe)"


class BaseTestKB(MindsDBTestBase):
    """MindsDB's BaseTestKB over HTTP: `run_sql`, `save_file`, `_create_kb`, `_get_ral_table`."""

    def set_embedding(self, dimension: int | None = None, base: int | None = None) -> None:
        self.embeddings.set_embedding(dimension, base)

    def reranker(self, **fields: Any) -> dict[str, Any]:
        """A reranking model served by the scripted LLM (MindsDB: any provider, `get_scores` patched)."""
        return {"provider": "openai", **fields, "base_url": self.llm.base_url}

    def _create_kb(
        self,
        name: str,
        embedding_model: dict[str, Any] | None = None,
        reranking_model: dict[str, Any] | None = None,
        content_columns: list[str] | None = None,
        id_column: str | None = None,
        metadata_columns: list[str] | None = None,
        storage: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        self.run_sql(f"drop knowledge base if exists {name}")

        if embedding_model is None:
            embedding_model = {
                "provider": "openai",
                "model_name": "dummy_model",
                "api_key": "dummy_key",
            }
        # adaptation: MindsDB patches LLMClient, so the named provider never runs; here the model is served
        # by MindsDBEmbeddings (OpenAI-compatible), keeping the test's model_name and api_key
        embedding_model = self.embeddings.mindsdb_model(
            **{k: v for k, v in embedding_model.items() if k not in ("provider", "base_url")}
        )

        kb_params: dict[str, Any] = {
            "embedding_model": embedding_model,
        }
        if reranking_model is not None:
            kb_params["reranking_model"] = reranking_model
        if content_columns is not None:
            kb_params["content_columns"] = content_columns
        if id_column is not None:
            kb_params["id_column"] = id_column
        if metadata_columns is not None:
            kb_params["metadata_columns"] = metadata_columns
        if params is not None:
            kb_params.update(params)

        # adaptation: no `storage = db_<kb>.default_collection` (a duckdb_faiss database in MindsDB)

        param_str = ""
        if kb_params:
            param_items = []
            for k, v in kb_params.items():
                param_items.append(f"{k}={json.dumps(v)}")
            param_str = ",".join(param_items)

        self.run_sql(
            f"""
            create knowledge base {name}
            using
                {param_str}
        """
        )

    def _ral_kb(self) -> None:
        """The knowledge base kb_ral: the RAL colours' English names by RAL number (from the file `ral`)."""
        self.save_file("ral", self._get_ral_table())

        self._create_kb("kb_ral")

        self.run_sql(
            """
            insert into kb_ral
            select ral id, english content from files.ral
        """
        )

    def _reranked_kb1(self) -> None:
        """The knowledge base kb1 of the RAL colours (file `ral`, columns id and content), reranked by the
        scripted LLM, which scores every document 0.8."""
        self.llm.get_scores = lambda query, docs: [0.8 for _ in docs]

        df = self._get_ral_table()
        df = df.rename(columns={"english": "content", "ral": "id"})
        self.save_file("ral", df)

        self._create_kb(
            "kb1",
            reranking_model=self.reranker(model_name="gpt-3", api_key="-"),
        )
        self.run_sql("insert into kb1 SELECT id, content FROM files.ral")

    def _wait_query(self, query_id: Any) -> None:
        """Polls `information_schema.queries` until the query `query_id` finishes; raises its error."""
        for _ in range(1000):
            time.sleep(0.2)
            ret = self.run_sql(f"select * from information_schema.queries where id = {query_id}")
            if ret["ERROR"][0] is not None:
                raise RuntimeError(ret["ERROR"][0])
            if ret["FINISHED_AT"][0] is not None:
                break

    def _get_ral_table(self) -> pd.DataFrame:
        data = [
            ["1000", "Green beige", "Beige verdastro"],
            ["1004", "Golden yellow", "Giallo oro"],
            ["9016", "Traffic white", "Bianco traffico"],
            ["9023", "Pearl dark grey", "Grigio scuro perlato"],
        ]

        return pd.DataFrame(data, columns=["ral", "english", "italian"])

    def kb_record(self, name: str) -> dict[str, Any]:
        r = self.mdb.client.get(f"{P}/knowledge_bases/{name}")
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]


REVIEW = {
    "review": "all is good, haven't used yet",
    "url": "https://laptops.com/123",
    "product": "probook",
    "specs": "Core i5; 8Gb; 1920х1080",
    "id": 123,
}


class TestKBNOAutoBatch(BaseTestKB):
    """MindsDB's class sets `config["knowledge_bases"]["disable_autobatch"] = True`; agentkb has no
    autobatching (every insert is one transaction), so there is nothing to switch off."""

    def test_kb(self) -> None:
        """Origin: test_kb (MindsDB test_knowledge_base.py @v26.1.0)."""
        self._create_kb("kb_review")

        self.run_sql("insert into kb_review (content) values ('review')")

        # selectable
        ret = self.run_sql("select * from kb_review")
        assert len(ret) == 1

        # show tables in default vectordb
        ret = self.run_sql("show knowledge bases")

        db_name = ret.STORAGE[0].split(".")[0]
        ret = self.run_sql(f"show tables from {db_name}")
        # only one default collection there
        assert len(ret) == 1

    def _review_kb(self, **columns: Any) -> None:
        """The knowledge base kb_review (its `columns` settings) holding REVIEW, inserted from a file whole."""
        self.save_file("reviews", pd.DataFrame([REVIEW]))
        self._create_kb("kb_review", **columns)

        self.run_sql(
            """
            insert into kb_review
            select * from files.reviews
        """
        )

    def test_kb_metadata__default_columns(self) -> None:
        """Origin: test_kb_metadata, case 1 "kb with default columns settings" (MindsDB @v26.1.0)."""
        record = REVIEW
        df = pd.DataFrame([record])
        self.save_file("reviews", df)

        # ---  case 1: kb with default columns settings ---
        self._create_kb("kb_review")

        self.run_sql(
            """
            insert into kb_review
            select review as content, id from files.reviews
        """
        )

        ret = self.run_sql("select * from kb_review where _original_doc_id = 123")
        assert len(ret) == 1
        assert ret["chunk_content"][0] == record["review"]

        # delete by metadata
        self.run_sql("delete from kb_review where _original_doc_id = 123")
        ret = self.run_sql("select * from kb_review where _original_doc_id = 123")
        assert len(ret) == 0

        # insert without id
        self.run_sql(
            """
            insert into kb_review
            select review as content, product, url from files.reviews
        """
        )

        # id column wasn't used
        ret = self.run_sql("select * from kb_review where _original_doc_id = 123")
        assert len(ret) == 0

        # product/url in metadata
        ret = self.run_sql(
            "select metadata->>'product' as product, metadata->>'url' as url from kb_review where product = 'probook'"
        )
        assert len(ret) == 1
        assert ret["product"][0] == record["product"]
        assert ret["url"][0] == record["url"]

        # using json operator in filter
        ret = self.run_sql(
            "select metadata->>'product' as product, metadata->>'url' as url "
            "from kb_review where metadata->>'product' = 'probook'"
        )
        assert len(ret) == 1
        assert ret["product"][0] == record["product"]
        assert ret["url"][0] == record["url"]

    def test_kb_metadata__defined_columns(self) -> None:
        """Origin: test_kb_metadata, case 2 "kb with defined columns" (MindsDB @v26.1.0)."""
        record = REVIEW

        # ---  case 2: kb with defined columns ---
        self._review_kb(
            content_columns=["review", "product"],
            id_column="url",
            metadata_columns=["specs", "id"],
        )

        ret = self.run_sql(
            "select chunk_content, metadata->>'specs' as specs, metadata->>'id' as id from kb_review"
        )  # url in id

        assert len(ret) == 2  # two columns are split in two records

        # review/product in content
        content = list(ret["chunk_content"])
        assert record["review"] in content
        assert record["product"] in content

        # specs/id in metadata
        assert ret["specs"][0] == record["specs"]
        assert str(ret["id"][0]) == str(record["id"])

    def test_kb_metadata__content_defined(self) -> None:
        """Origin: test_kb_metadata, case 3 "content is defined, id is id, the rest goes to metadata"
        (MindsDB @v26.1.0)."""
        record = REVIEW

        # ---  case 3: content is defined, id is id, the rest goes to metadata ---
        self._review_kb(content_columns=["review"])

        # metadata as columns
        ret = self.run_sql(
            """
                select chunk_content, specs, product, url
                from kb_review
                where _original_doc_id = 123 -- id is id
        """
        )
        assert len(ret) == 1
        # review in content
        assert ret["chunk_content"][0] == record["review"]

        # specs/url/product in metadata
        assert ret["specs"][0] == record["specs"]
        assert ret["url"][0] == record["url"]
        assert ret["product"][0] == record["product"]

    def test_join_kb_table(self) -> None:
        """Origin: test_join_kb_table, the join (MindsDB @v26.1.0)."""
        self._ral_kb()

        ret = self.run_sql(
            """
            select t.italian, k.id, t.ral from kb_ral k
            join files.ral t on t.ral = k.id
            where k.content = 'white'
            limit 2
        """
        )

        assert len(ret) == 2
        # values are matched
        diff = ret[ret["ral"] != ret["id"]]
        assert len(diff) == 0

    def test_join_kb_table__operators(self) -> None:
        """Origin: test_join_kb_table, section "operators" (MindsDB @v26.1.0)."""
        self._ral_kb()

        # =================   operators  =================
        ret = self.run_sql(
            """
            select * from kb_ral
            where id = '1000'
        """
        )
        assert len(ret) == 1
        assert ret["id"][0] == "1000"

        ret = self.run_sql(
            """
            select * from kb_ral
            where id != '1000'
        """
        )
        assert len(ret) == 3
        assert "1000" not in ret["id"]

        ret = self.run_sql(
            """
            select * from kb_ral
            where id in ('1000', '1004')
        """
        )
        assert len(ret) == 2
        assert set(ret["id"]) == {"1000", "1004"}

        ret = self.run_sql(
            """
            select * from kb_ral
            where id not in ('1000', '1004')
        """
        )
        assert len(ret) == 2
        assert set(ret["id"]) == {"9016", "9023"}

    def test_kb_partitions(self) -> None:
        """Origin: test_kb_partitions (MindsDB @v26.1.0, marked slow there). MindsDB's mocked postgres handler
        (streamed and whole-table answers) is a real postgres table here; `task_monitor()` (MindsDB's
        background task runner) has no counterpart: agentkb's worker runs in the server."""
        df = self._get_ral_table()

        df = pd.concat([df] * 30)
        # unique ids
        df["id"] = list(map(str, range(len(df))))

        self.mdb.set_handler("pg", tables={"ral": df})

        def check_partition(insert_sql: str) -> None:
            self._create_kb("kb_part", content_columns=["english"])

            # load kb
            ret = self.run_sql(insert_sql)
            # inserts returns query
            query_id = ret["ID"][0]

            # wait loaded
            self._wait_query(query_id)

            # check content
            ret = self.run_sql("select * from kb_part")
            assert len(ret) == len(df)

            # check queries table
            ret = self.run_sql(f"select * from information_schema.queries where id = {query_id}")
            assert len(ret) == 1
            rec = ret.iloc[0]
            assert "kb_part" in ret["SQL"][0]
            assert ret["ERROR"][0] is None
            assert ret["FINISHED_AT"][0] is not None

            # test describe
            ret = self.run_sql("describe knowledge base kb_part")
            assert len(ret) == 1
            rec_d = ret.iloc[0]
            assert rec_d["PROCESSED_ROWS"] == rec["PROCESSED_ROWS"]
            assert rec_d["INSERT_STARTED_AT"] == rec["STARTED_AT"]
            assert rec_d["INSERT_FINISHED_AT"] == rec["FINISHED_AT"]
            assert rec_d["QUERY_ID"] == query_id

            # del query
            self.run_sql(f"SELECT query_cancel({rec['ID']})")
            ret = self.run_sql("select * from information_schema.queries")
            assert len(ret) == 0

            ret = self.run_sql("describe knowledge base kb_part")
            assert len(ret) == 1
            rec_d = ret.iloc[0]
            assert rec_d["PROCESSED_ROWS"] is None
            assert rec_d["INSERT_STARTED_AT"] is None
            assert rec_d["INSERT_FINISHED_AT"] is None
            assert rec_d["QUERY_ID"] is None

        # --- stream mode --- (MindsDB: the handler streams the table in 10 chunks)
        # test iterate
        check_partition(
            """
            insert into kb_part SELECT id, english FROM pg.ral
            using batch_size=20, track_column=id
        """
        )

        # test iterate (mix case of track_column)
        check_partition(
            """
            insert into kb_part SELECT id, english FROM pg.ral
            using batch_size=20, track_column=Id
        """
        )

        # without track column
        check_partition(
            """
            insert into kb_part SELECT id, english FROM pg.ral
            using batch_size=20
        """
        )

        # --- general mode --- (MindsDB: the handler answers the whole table at once)
        # test iterate
        check_partition(
            """
            insert into kb_part SELECT id, english FROM  pg.ral
            using batch_size=20, track_column=id
        """
        )


class TestKBAlgebra(BaseTestKB):
    """Origin: test_kb_algebra (MindsDB test_knowledge_base.py @v26.1.0), one test per section."""

    def _items_kb(self) -> None:
        lines, i = [], 0
        for color in ("white", "red", "green"):
            for size in ("big", "middle", "small"):
                for shape in ("square", "triangle", "circle"):
                    i += 1
                    lines.append([i, i, f"{color} {size} {shape}", color, size, shape, dt.date(2000, 1, i)])
        df = pd.DataFrame(lines, columns=["id", "num", "content", "color", "size", "shape", "valid_date"])

        self.save_file("items", df)

        # MindsDB names {"provider": "bedrock", "model_name": "titan"} (patched); served by the stub here
        self._create_kb("kb_alg", embedding_model={"provider": "bedrock", "model_name": "titan"})

        self.run_sql(
            """
        insert into kb_alg
            select * from files.items
        """
        )

    def test_kb_algebra__exclude_values(self) -> None:
        """Section "search value excluding others"."""
        self._items_kb()
        # check 3 most relative records
        self._assert_green_not_square_or_triangle(
            """
           select * from kb_alg where
            content = 'green'
            and content not IN ('square', 'triangle')
            and content is not null
           limit 3
        """
        )

    def test_kb_algebra__exclude_value_and_metadata(self) -> None:
        """Section "search value excluding other and metadata"."""
        self._items_kb()
        self._assert_green_not_square_or_triangle(
            """
           select * from kb_alg where
            content = 'green'
            and content != 'square'
            and shape != 'triangle'
           limit 3
        """
        )

    def test_kb_algebra__in_list_excluding(self) -> None:
        """Section "searching value in list with excluding"."""
        self._items_kb()
        ret = self.run_sql(
            """
           select * from kb_alg where
            content in ('green', 'white')
            and content not like 'green'
           limit 3
        """
        )
        for content in ret["chunk_content"]:
            assert "white" in content

    def _assert_green_not_square_or_triangle(self, query: str) -> None:
        """Runs `query`: every chunk it finds must be green, and neither square nor triangle."""
        ret = self.run_sql(query)
        for content in ret["chunk_content"]:
            assert "green" in content
            assert "square" not in content
            assert "triangle" not in content

    def _assert_green_big_white_small(self, query: str) -> None:
        """Runs `query`: every green chunk it finds must be big, every other one small."""
        ret = self.run_sql(query)
        for content in ret["chunk_content"]:
            if "green" in content:
                assert "big" in content
            else:
                assert "small" in content

    def test_kb_algebra__or(self) -> None:
        """Section "using OR"."""
        self._items_kb()
        self._assert_green_big_white_small(
            """
           select * from kb_alg where
               (content like 'green' and size='big')
            or (content like 'white' and size='small')
            or (content is null)
           limit 3
        """
        )

    def test_kb_algebra__between_and_less_than(self) -> None:
        """Section "using between and less than"."""
        self._items_kb()
        ret = self.run_sql(
            """
           select * from kb_alg where
            content like 'white' and num between 3 and 6 and num < 5
           limit 3
        """
        )
        assert len(ret) == 2

        for _, item in ret.iterrows():
            assert "white" in item["chunk_content"]
            assert item["metadata"]["num"] in (3, 4)

    def test_kb_algebra__chunk_content_like(self) -> None:
        """Section "chunk_content and '%'"."""
        self._items_kb()
        self._assert_green_big_white_small(
            """
           select * from kb_alg where
               (chunk_content like '%green%' and size='big')
            or (chunk_content like '%white%' and size='small')
            or (chunk_content is null)
           limit 3
        """
        )

    def test_kb_algebra__metadata_like(self) -> None:
        """Section "metadata: like, not like"."""
        self._items_kb()
        for query in ("trian%", "%riangl%", "%angle"):
            ret = self.run_sql(f"select * from kb_alg where shape like '{query}'")

            # only triangle
            assert set(ret["shape"]) == {"triangle"}

    def test_kb_algebra__metadata_comparisons(self) -> None:
        """Section "metadata: '>=', '>', '<=', '<'"."""
        self._items_kb()
        ret = self.run_sql("select * from kb_alg where color > 'red'")
        # only white
        assert set(ret["color"]) == {"white"}

        ret = self.run_sql("select * from kb_alg where color < 'red'")
        # only green
        assert set(ret["color"]) == {"green"}

        ret = self.run_sql("select * from kb_alg where color <= 'red' and color > 'green'")
        # only red
        assert set(ret["color"]) == {"red"}

    def test_kb_algebra__int_and_date_filters(self) -> None:
        """Sections "filter by int" and "filter by date"."""
        self._items_kb()
        # filter by int
        ret = self.run_sql("select * from kb_alg where num >= 10")
        assert ret["num"].min() == 10

        # filter by date
        ret = self.run_sql("select * from kb_alg where valid_date >= '2000-01-15'")
        assert ret["valid_date"].min() > "2000-01-14" and ret["valid_date"].min() < "2000-01-16"

        ret = self.run_sql("select * from kb_alg where valid_date < '2000-01-15'")
        assert ret["valid_date"].max() > "2000-01-13" and ret["valid_date"].min() < "2000-01-15"

    def test_kb_algebra__id_and_content(self) -> None:
        """Section "filter by id and content"."""
        self._items_kb()
        ret = self.run_sql("select * from kb_alg where content = 'green' and id < 22")
        assert ret["color"][0] == "green"
        assert ret["id"].max() < 22


class TestKBSelectAndParams(BaseTestKB):
    def test_select_allowed_columns(self) -> None:
        """Origin: test_select_allowed_columns (MindsDB @v26.1.0)."""
        # -- no metadata are specified, generated from inserts --
        self._create_kb("kb1")

        self.run_sql("insert into kb1 (id, content, col1) values (1, 'cont1', 'val1')")
        self.run_sql("insert into kb1 (id, content, col2) values (2, 'cont2', 'val2')")

        # existed value
        ret = self.run_sql("select * from kb1 where col1='val1'")
        assert len(ret) == 1 and ret["chunk_content"][0] == "cont1"

        # not existed value
        ret = self.run_sql("select * from kb1 where col1='not exist'")
        assert len(ret) == 0

        # not existed column
        with pytest.raises(ValueError):
            self.run_sql("select * from kb1 where col3='val2'")

        # -- metadata are specified --
        self._create_kb(
            "kb2",
            metadata_columns=["col1", "col2", "col3"],
        )

        self.run_sql("insert into kb2 (id, content, col1) values (1, 'cont1', 'val1')")
        self.run_sql("insert into kb2 (id, content, col2) values (2, 'cont2', 'val2')")

        # existed value
        ret = self.run_sql("select * from kb2 where col1='val1'")
        assert len(ret) == 1 and ret["chunk_content"][0] == "cont1"

        # not existed value
        ret = self.run_sql("select * from kb2 where col3='cont1'")
        assert len(ret) == 0

        # not existed column
        with pytest.raises(ValueError):
            self.run_sql("select * from kb2 where cont10='val2'")

    def test_evaluate(self) -> None:
        """Origin: test_evaluate, cases 1-3 (MindsDB @v26.1.0). `mock_openai` (the LLM generating test data)
        and `get_scores` (0.8 for every doc) are the scripted LLM; the model of its first request is checked
        as MindsDB checks `chat.completions.create`'s."""
        question, answer = "2+2", "4"
        agent_response = f"""
            {{"query": "{question}", "reference_answer": "{answer}"}}
        """
        self.llm.script(*[self._text(agent_response)] * 20)

        # reranking result
        self._reranked_kb1()

        # --- case 1: use table as source, reranker llm, no evaluate

        ret = self.run_sql(
            """
            Evaluate knowledge base kb1
            using
              test_table = files.eval_test,
              generate_data = {
                 'from_sql': 'select content, id from files.ral',
                 'count': 3
              },
              evaluate=false
        """
        )

        # reranker model is used
        assert self.llm.requests[0].body["model"] == "gpt-3"

        # no response
        assert len(ret) == 0

        # check test data
        df_test = self.run_sql("select * from files.eval_test")
        assert len(df_test) == 3
        assert df_test["question"][0] == question
        assert df_test["answer"][0] == answer

        # --- case 2: use kb as source, custom llm, evaluate
        self.llm.script(*[self._text(agent_response)] * 20)
        self.run_sql("drop table files.eval_test")

        ret = self.run_sql(
            f"""
            Evaluate knowledge base kb1
            using
              test_table = files.eval_test,
              generate_data = true,
              llm={{'provider': 'openai', 'api_key':'-', 'model_name':'gpt-4', 'base_url': '{self.llm.base_url}'}},
              save_to = files.eval_res
        """
        )

        # custom model is used
        assert self.llm.requests[0].body["model"] == "gpt-4"

        # eval resul in response
        assert len(ret) == 1

        # check test data
        df_test = self.run_sql("select * from files.eval_test")
        assert len(df_test) > 0
        assert df_test["question"][0] == question
        assert df_test["answer"][0] == answer

        # check result
        df_res = self.run_sql("select * from files.eval_res")
        assert len(df_res) == 1
        assert df_res["total"][0] == len(df_test)
        # compare with eval response
        assert df_res["total"][0] == ret["total"][0]
        assert df_res["total_found"][0] == ret["total_found"][0]

        # --- case 3: evaluate without generation and saving

        ret = self.run_sql(
            """
            Evaluate knowledge base kb1
            using
              test_table = files.eval_test
        """
        )

        # eval resul in response
        assert len(ret) == 1
        # compare with table
        assert df_res["total"][0] == ret["total"][0]
        assert df_res["total_found"][0] == ret["total_found"][0]

    @staticmethod
    def _text(content: str) -> Any:
        from tests.compat.stubs import text

        return text(content)

    def test_evaluate__reranking_disabled(self) -> None:
        """Origin: test_evaluate, section "test reranking disabled" (MindsDB @v26.1.0): `get_scores` is called
        once per search, and not at all with `reranking = false`."""
        self._reranked_kb1()

        # --- test reranking disabled ---
        self.llm.scores_calls.clear()
        df = self.run_sql("select * from kb1 where content='test'")
        assert len(self.llm.scores_calls) == 1  # mock_get_scores.assert_called_once()
        assert len(df) > 0

        self.llm.scores_calls.clear()
        df = self.run_sql("select * from kb1 where content='test' and reranking =false")
        assert len(self.llm.scores_calls) == 0  # mock_get_scores.assert_not_called()
        assert len(df) > 0

    def test_save_default_params(self, fresh_app: Any) -> None:
        """Origin: test_save_default_params (MindsDB @v26.1.0). MindsDB patches `Config.get` for
        default_embedding_model / default_reranking_model; here an agentkb is started with those settings
        (`default_reranking_model` is MindsDB's name for it; agentkb has no such setting yet)."""
        # reranking result
        self.llm.get_scores = lambda query, docs: [0.8 for _ in docs]

        defaults = {
            "default_embedding_model": self.embeddings.mindsdb_model(
                model_name="dummy_model", api_key="dummy_key"
            ),
            "default_reranking_model": self.reranker(model_name="openai_model", api_key="openai_key"),
        }
        with fresh_app(**defaults) as app, httpx.Client(base_url=app.url, timeout=120) as client:
            self.mdb = MindsDB(client, self.embeddings)

            self._create_kb("kb1")

            ret = self.run_sql("describe  knowledge base kb1")

            # default model was saved
            assert "dummy_model" in ret["EMBEDDING_MODEL"][0]
            assert "openai_model" in ret["RERANKING_MODEL"][0]

            # disable default reranking
            self._create_kb("kb2", params={"reranking_model": False})

            ret = self.run_sql("describe knowledge base kb2")

            assert "openai_model" not in ret["RERANKING_MODEL"][0]

    def test_relevance_filtering_gt_operator(self) -> None:
        """Origin: test_relevance_filtering_gt_operator (MindsDB @v26.1.0)."""
        test_data = [
            {"id": "1", "content": "This is about machine learning and AI"},
            {"id": "2", "content": "This is about cooking recipes"},
            {
                "id": "3",
                "content": "This is about artificial intelligence and neural networks",
            },
            {"id": "4", "content": "This is about gardening tips"},
        ]
        df = pd.DataFrame(test_data)
        self.save_file("test_docs", df)
        self._create_kb("kb_relevance_test")
        self.run_sql(
            """
            insert into kb_relevance_test
            select id, content from files.test_docs
        """
        )

        ret = self.run_sql(
            """
            select * from kb_relevance_test
            where content = 'machine learning'
            and relevance > 0.5
        """
        )
        assert isinstance(ret, pd.DataFrame)

    def test_alter_kb(self) -> None:
        """Origin: test_alter_kb (MindsDB @v26.1.0). MindsDB reads `KnowledgeBase.params` from its database;
        here the KB record is read, and the keys (masked in records) are checked on the stubs' requests."""
        self.llm.get_scores = lambda query, docs: [0.8 for _ in docs]

        self._create_kb(
            "kb1",
            embedding_model={
                "provider": "bedrock",
                "model_name": "dummy_model",
                "api_key": "embed-key-1",
            },
            reranking_model=self.reranker(model_name="gpt-3", api_key="rerank-key-1"),
        )

        # update KB
        self.run_sql(
            """
            ALTER KNOWLEDGE BASE kb1
            USING
                reranking_model={'api_key': 'rerank-key-2'},
                embedding_model={'api_key': 'embed-key-2'},
                id_column='my_id',
                content_columns=['my_content'],
                metadata_columns=['my_meta']
        """
        )

        # check updated values in database
        kb = self.kb_record("kb1")
        assert kb["id_column"] == "my_id"
        assert kb["content_columns"] == ["my_content"]
        assert kb["metadata_columns"] == ["my_meta"]

        assert kb["reranking_model"]["model_name"] == "gpt-3"
        # the new keys are the ones sent (MindsDB: kb.params[...]["api_key"] == "...-key-2")
        self.embeddings.reset()
        self.llm.scores_calls.clear()
        self.run_sql("insert into kb1 (my_id, my_content, my_meta) values (1, 'cat', 'x')")
        self.run_sql("select * from kb1 where content = 'cat'")
        assert self.llm.scores_calls
        assert self.llm.requests[-1].headers["authorization"] == "Bearer rerank-key-2"
        assert self.embeddings.requests[-1].headers["authorization"] == "Bearer embed-key-2"

        # update embedding fails
        with pytest.raises(ValueError):
            self.run_sql("ALTER KNOWLEDGE BASE kb1 USING embedding_model={'model_name': 'my_model'}")

        with pytest.raises(ValueError):
            self.run_sql("ALTER KNOWLEDGE BASE kb1 USING embedding_model={'provider': 'ollama'}")

        # different provider: params are replaced
        self.run_sql(
            "ALTER KNOWLEDGE BASE kb1 USING reranking_model={'provider': 'ollama', 'model_name': 'mistral'}"
        )
        kb = self.kb_record("kb1")

        assert kb["reranking_model"]["provider"] == "ollama"
        assert "api_key" not in kb["reranking_model"]

        # disable reranking model and ensure config is cleared
        self.run_sql("ALTER KNOWLEDGE BASE kb1 USING reranking_model = false")
        kb = self.kb_record("kb1")
        # MindsDB: kb.params["reranking_model"] == {}; the record may also say null (spec 2.2: optional)
        assert kb["reranking_model"] in ({}, None)

    def test_ollama(self) -> None:
        """Origin: test_ollama (MindsDB @v26.1.0). MindsDB patches the OpenAI client the ollama provider uses;
        here both models are `provider: ollama` with `base_url` at the stubs (ollama's API is OpenAI's)."""
        # reranking result
        self.llm.get_scores = lambda query, docs: [0.8 for _ in docs]

        self.run_sql("drop knowledge base if exists kb1")
        embedding_model = {"provider": "ollama", "model_name": "nomic", "base_url": self.embeddings.url}
        reranking_model = {"provider": "ollama", "model_name": "mistral", "base_url": self.llm.base_url}
        self.run_sql(
            f"create knowledge base kb1 using reranking_model={json.dumps(reranking_model)}, "
            f"embedding_model={json.dumps(embedding_model)}"
        )

        ret = self.run_sql("describe  knowledge base kb1")

        assert "api_key" not in ret["EMBEDDING_MODEL"][0]
        assert "api_key" not in ret["RERANKING_MODEL"][0]

    def test_kb_uppercase_source_columns(self) -> None:
        """Origin: test_kb_uppercase_source_columns (MindsDB @v26.1.0)."""
        df = pd.DataFrame(
            [
                [
                    1,
                    'Laptop Pro 15"',
                    "High-performance laptop with 16GB RAM and 512GB SSD",
                    "Electronics",
                    1299.99,
                ],
                [2, "Table", "Dining table,  144 cm", "Home", 100],
            ],
            columns=["Product_ID", "Product_Name", "Description", "Category", "Price"],
        )

        # the same products under mixed case, uppercase and lowercase source column names
        cases: list[tuple[str, Callable[[str], str], str, str]] = [
            (
                "mixedcase",
                str,
                "select `Category` from kb_oracle_mixedcase  where `Category` = 'Home'",
                "Home",
            ),
            (
                "uppercase",
                str.upper,
                "select * from kb_oracle_uppercase where `CATEGORY` = 'Electronics'",
                "Electronics",
            ),
            (
                "lowercase",
                str.lower,
                "select category from kb_oracle_lowercase where category = 'Home'",
                "Home",
            ),
        ]
        columns = list(df.columns)
        for i, (case, rename, query, category) in enumerate(cases):
            if i:
                self.run_sql("drop table files.oracle_products")
            df.columns = [rename(c) for c in columns]
            self.save_file("oracle_products", df)

            self._create_kb(
                f"kb_oracle_{case}",
                content_columns=[rename("Product_Name"), rename("Description")],
                id_column=rename("Product_ID"),
                metadata_columns=[rename("Category"), rename("Price")],
            )
            self.run_sql(
                f"""
                insert into kb_oracle_{case}
                select * from files.oracle_products
                """
            )
            ret = self.run_sql(query)
            assert len(ret) == 2
            assert ret[rename("Category")][0] == category

    def test_duplicated_ids(self) -> None:
        """Origin: test_duplicated_ids (MindsDB @v26.1.0)."""
        self._create_kb("kb1")

        # insert bug content
        self.run_sql(f"insert into kb1 (id, content) values (1, '{'my content' * 1000}')")

        # insert second id
        self.run_sql("insert into kb1 (id, content) values (2, 'content2')")

        # first was chunked
        ret = self.run_sql("select * from kb1 where id = 1")
        assert len(ret) > 1

        # second wasn't
        ret = self.run_sql("select * from kb1 where id = 2")
        assert len(ret) == 1

        # insert short string
        self.run_sql("insert into kb1 (id, content) values (1, 'content')")

        # chunks were removed
        ret = self.run_sql("select * from kb1 where id = 1")
        assert len(ret) == 1
        assert ret["chunk_content"][0] == "content"

        # second id wasn't removed
        ret = self.run_sql("select * from kb1 where id = 2")
        assert len(ret) == 1

    def test_update(self) -> None:
        """Origin: test_update (MindsDB @v26.1.0)."""
        self._create_kb("kb1")

        self.run_sql("insert into kb1 (id, content) values (1, 'cat')")

        ret = self.run_sql("select * from kb1 where id = 1")
        assert len(ret) == 1
        chunk_id = ret["chunk_id"][0]

        # update
        self.run_sql(f"update kb1 set content = 'dog' where chunk_id = '{chunk_id}'")
        # check
        ret = self.run_sql("select * from kb1 where id = 1")
        assert len(ret) == 1
        assert ret["chunk_content"][0] == "dog"

    def test_reranking(self) -> None:
        """Origin: test_reranking (MindsDB @v26.1.0)."""
        self._create_kb(
            "kb_ral",
            content_columns=["english"],
            reranking_model=self.reranker(model_name="gpt-3", api_key="embed-key-1"),
        )

        df = self._get_ral_table()
        self.save_file("ral", df)

        self.run_sql(
            """
                insert into kb_ral
                select * from files.ral
            """
        )

        # rank from greater to lower
        self.llm.get_scores = lambda query, docs: [1 - i / 4 for i in range(len(docs))]
        ret = self.run_sql("select * from kb_ral where content='white'")
        assert "white" in ret["chunk_content"].iloc[0]

        # reverse rank: from lower to greater. the most semantic result have to be moved back
        self.llm.get_scores = lambda query, docs: [i / 4 for i in range(len(docs))]
        ret = self.run_sql("select * from kb_ral where content='white'")
        assert "white" not in ret["chunk_content"].iloc[0]

    def test_hybrid_search(self) -> None:
        """Origin: test_hybrid_search (MindsDB @v26.1.0)."""
        df = self._get_ral_table()
        self.save_file("ral", df)

        self._create_kb("kb_hybrid", content_columns=["english"])

        self.run_sql("insert into kb_hybrid  select * from files.ral")

        # changing embedding config, making semantic search irrelevant
        self.set_embedding(base=20)

        # white is not at the top
        ret = self.run_sql("select * from kb_hybrid where content='white'")
        assert "white" not in ret["chunk_content"].iloc[0]

        # but it is when hybrid search is used
        ret = self.run_sql("""
            select * from kb_hybrid where content='white'
            and hybrid_search_alpha = 0
        """)
        assert "white" in ret["chunk_content"].iloc[0]

        # checking alpha=0.5
        ret = self.run_sql("""
            select * from kb_hybrid where content='white'
            and hybrid_search = true
        """)
        assert "white" in ret["chunk_content"].iloc[0]

    def test_create_index(self) -> None:
        """Origin: test_create_index (MindsDB @v26.1.0)."""
        df = self._get_ral_table()

        df = pd.concat([df] * 30)
        # unique ids
        df["id"] = list(map(str, range(len(df))))
        self.save_file("ral", df)

        # create kb, fill it
        self._create_kb("kb_ral", content_columns=["english"])

        self.run_sql("insert into kb_ral select * from files.ral")

        # create index default index (ivf_file, for windows it is ivf)
        self.run_sql(
            """
            CREATE INDEX ON KNOWLEDGE_BASE kb_ral WITH (nlist=1)
            """
        )

        # check kb works after index was created
        ret = self.run_sql("select * from kb_ral where content='white'")
        assert "white" in ret["chunk_content"].iloc[0]

        # specified index
        self.run_sql(
            """
            CREATE INDEX ON KNOWLEDGE_BASE kb_ral
            WITH (nlist=1, type='ivf', train_count=50)
            """
        )
        ret = self.run_sql("select * from kb_ral where content='white'")
        assert "white" in ret["chunk_content"].iloc[0]


@pytest.fixture(scope="class")
def autobatch_app(fresh_app: Any) -> Iterator[Any]:
    with fresh_app(autobatch_inserts=True) as app:
        yield app


class TestKBAutoBatch(BaseTestKB):
    """Adaptation: MindsDB runs this class with autobatch on, its default for its default storage (faiss);
    for pgvector storage, agentkb's, MindsDB's default is off (`disable_pgvector_autobatch`) and so is agentkb's
    (`autobatch_inserts`), so the class runs on an agentkb started with `autobatch_inserts = true`."""

    @pytest.fixture(autouse=True)
    def _autobatch(
        self, _fresh_mindsdb: None, autobatch_app: Any, mdb_embeddings: MindsDBEmbeddings
    ) -> Iterator[None]:
        with httpx.Client(base_url=autobatch_app.url, timeout=120) as client:
            self.mdb = MindsDB(client, mdb_embeddings)
            self.mdb.reset()
            yield

    def test_no_autobatch(self) -> None:
        """Origin: TestKBAutoBatch.test_no_autobatch (MindsDB @v26.1.0)."""
        df = self._get_ral_table()
        self.save_file("ral", df)

        # -- sync plan --
        # default id column is `id`, but dataset doesn't have it:
        # query should be switched to a sync plan
        self._create_kb("kb_ral", content_columns=["english"])

        ret = self.run_sql(
            """
                insert into kb_ral
                select * from files.ral
            """
        )
        # no response from insert
        assert ret is None or len(ret) == 0
        ret = self.run_sql("select * from kb_ral limit 1")
        assert len(ret) == 1

    def test_autobatch(self) -> None:
        """Origin: TestKBAutoBatch.test_autobatch (MindsDB @v26.1.0)."""
        df = self._get_ral_table()
        self.save_file("ral", df)

        # -- async plan --
        self._create_kb("kb_ral_async", id_column="ral", content_columns=["english"])

        ret = self.run_sql(
            """
                insert into kb_ral_async
                select * content from files.ral
            """
        )
        # result is the record from `queries`
        assert len(ret) == 1
        query_id = ret["ID"][0]
        self._wait_query(query_id)

        ret = self.run_sql("select * from kb_ral_async where id = '1000'")
        assert ret["id"][0] == "1000"
