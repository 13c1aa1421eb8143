"""Ported from MindsDB `tests/unit/executor/test_lowercase.py` @v26.1.0: the tests for the object kinds agentkb
has (projects, data sources, agents, knowledge bases). Names are stored lower-case; a back-quoted name keeps its
case and must be dropped back-quoted.

Adaptations: the `dummy_data` engine (a MindsDB test handler) is `sqlite` with a `db_file`; the KB test does not
create a `duckdb_faiss` storage database, and its embedder is MindsDB's dummy embedder served over HTTP;
`check_agent_llm` is patched in MindsDB (no LLM call on create), and agentkb makes none.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.compat.mdb import MindsDB, MindsDBEmbeddings


class TestLowercase:
    mdb: MindsDB
    embeddings: MindsDBEmbeddings

    @pytest.fixture(autouse=True)
    def _fresh_mindsdb(
        self, mdb: MindsDB, mdb_embeddings: MindsDBEmbeddings, tmp_path: Path
    ) -> Iterator[None]:
        mdb.reset()
        mdb_embeddings.set_embedding()
        self.mdb, self.embeddings = mdb, mdb_embeddings
        db_file = tmp_path / "dummy_data.sqlite"
        sqlite3.connect(db_file).close()
        # MindsDB: ENGINE = 'dummy_data'
        self.dummy_data = f"ENGINE = 'sqlite', PARAMETERS = {json.dumps({'db_file': str(db_file)})}"
        yield

    def run_sql(self, sql: str) -> pd.DataFrame | None:
        return self.mdb.run_sql(sql)

    def test_project_name_lowercase(self) -> None:
        """Origin: test_project_name_lowercase (MindsDB test_lowercase.py @v26.1.0)."""
        # quoted name in mix case
        self.run_sql("CREATE DATABASE `MyProject`")

        res = self.run_sql("SELECT * FROM INFORMATION_SCHEMA.DATABASES WHERE name = 'MyProject'")
        assert len(res) == 1

        with pytest.raises(Exception):  # noqa: B017 (MindsDB's assertion)
            self.run_sql("DROP DATABASE MyProject")
        self.run_sql("DROP DATABASE `MyProject`")

        # processing is slightly different for 'projects' (without engine) and integrations, so we do cycle for both.
        for engine in ["", f" WITH {self.dummy_data}"]:
            for project_name in ["myproject", "MyProject", "MYPROJECT"]:
                another_name = "myPROJECT"
                self.run_sql(f"CREATE DATABASE {project_name} {engine}")

                res = self.run_sql(
                    f"SELECT * FROM INFORMATION_SCHEMA.DATABASES where name = '{another_name}'"
                )
                assert len(res) == 0

                res = self.run_sql(
                    f"SELECT * FROM INFORMATION_SCHEMA.DATABASES where name = '{project_name.lower()}'"
                )
                assert res["TYPE"][0] == ("project" if engine == "" else "data")

                if engine == "":
                    # change name for projects
                    with pytest.raises(Exception):  # noqa: B017
                        self.run_sql(f"ALTER DATABASE `{another_name}` NAME = '{another_name.lower()}'")
                    with pytest.raises(Exception):  # noqa: B017
                        self.run_sql(f"ALTER DATABASE {another_name} NAME = '{another_name}'")
                    self.run_sql(f"ALTER DATABASE {another_name} NAME = '{another_name.lower()}'")

                with pytest.raises(Exception):  # noqa: B017
                    self.run_sql(f"DROP DATABASE `{another_name}`")

                self.run_sql(f"DROP DATABASE {another_name}")

    def test_agent_name_lowercase(self) -> None:
        """Origin: test_agent_name_lowercase (MindsDB @v26.1.0)."""
        agent_params = """
                model={
                    "model_name": "gpt-3.5-turbo",
                    "provider": "openai"
                },
                prompt_template='Answer the user input in a helpful way using tools',
                mode='text'
        """

        # mixed case: agent
        self.run_sql(f"create agent `MyAGENT` using {agent_params}")

        res = self.run_sql("select * from information_schema.agents where name = 'MyAGENT'")
        assert len(res) == 1

        with pytest.raises(Exception):  # noqa: B017
            self.run_sql("drop agent MyAGENT")
        self.run_sql("drop agent `MyAGENT`")

        for agent_name in "myagent", "MyAgent", "MYAGENT":
            another_agent_name = "myAGENT"

            self.run_sql(f"""
                create agent {agent_name} using {agent_params}
            """)

            # switch to lowercase
            self.run_sql(f"""
                update agent {agent_name} set {agent_params}
            """)

            ret = self.run_sql(f"select * from information_schema.agents where name = '{agent_name.lower()}'")
            assert len(ret) == 1

            with pytest.raises(Exception):  # noqa: B017
                self.run_sql(f"drop agent `{another_agent_name}`")
            self.run_sql(f"drop agent {another_agent_name}")

    def test_knowledgebase_name_lowercase(self) -> None:
        """Origin: test_knowledgebase_name_lowercase (MindsDB @v26.1.0)."""
        embedding_model = json.dumps(
            self.embeddings.mindsdb_model(model_name="dummy_model", api_key="dummy_key")
        )
        kb_params = f"""
            using embedding_model = {embedding_model}
        """

        # mixed case
        self.run_sql(f"CREATE KNOWLEDGE BASE `MyKB` {kb_params}")

        res = self.run_sql("SELECT * FROM INFORMATION_SCHEMA.KNOWLEDGE_BASES WHERE name = 'MyKB'")
        assert len(res) == 1

        with pytest.raises(Exception):  # noqa: B017
            self.run_sql("DROP KNOWLEDGE BASE MyKB")
        self.run_sql("DROP KNOWLEDGE BASE `MyKB`")

        for kb_name in ["mykb", "MyKB", "MYKB"]:
            another_kb_name = "myKB"

            self.run_sql(f"CREATE KNOWLEDGE BASE {kb_name} {kb_params}")

            res = self.run_sql(f"""
                SELECT * FROM INFORMATION_SCHEMA.KNOWLEDGE_BASES WHERE name = '{kb_name.lower()}'
            """)
            assert res["NAME"][0] == "mykb"

            with pytest.raises(Exception):  # noqa: B017
                self.run_sql(f"DROP KNOWLEDGE BASE `{another_kb_name}`")
            self.run_sql(f"DROP KNOWLEDGE BASE {another_kb_name}")

    def test_database_lowercase(self) -> None:
        """Origin: test_database_lowercase (MindsDB @v26.1.0)."""
        # mixed case
        self.run_sql(f"CREATE DATABASE `MyDB` using {self.dummy_data}")

        res = self.run_sql("SELECT * FROM INFORMATION_SCHEMA.DATABASES WHERE name = 'MyDB'")
        assert len(res) == 1

        with pytest.raises(Exception):  # noqa: B017
            self.run_sql("DROP DATABASE MyDB")
        self.run_sql("DROP DATABASE `MyDB`")

        for name in ["mydb", "MyDB", "MYDB"]:
            another_name = "myDb"
            self.run_sql(f"create database {name} using {self.dummy_data}")

            res = self.run_sql(f"SELECT * FROM INFORMATION_SCHEMA.DATABASES WHERE name = '{name.lower()}'")
            assert len(res) == 1

            with pytest.raises(Exception):  # noqa: B017
                self.run_sql(f"DROP DATABASE `{another_name}`")

            self.run_sql(f"DROP DATABASE {name}")
