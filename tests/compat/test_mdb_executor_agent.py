"""Ported from MindsDB `tests/unit/executor/test_agent.py` @v25.14.1 (the tool-calling LangChain agent the
spec describes).

The SQL is MindsDB's, sent to `POST /api/sql/query`; the assertions are MindsDB's. What changed:

- `@patch("openai.OpenAI")` + `set_openai_completion(mock, [...])` → the scripted OpenAI-compatible LLM
  (`llm.script(...)`). MindsDB scripts ReAct text ("Action: kb_info_tool / Action Input: kb_hide"); agentkb's
  agent uses OpenAI tool calls, so each scripted action is the same tool call with the same input.
- Every agent's model is pointed at the stub by adding `base_url` where MindsDB gives the model: inside
  `model = {...}`, or as one more flat `USING` parameter (MindsDB 25.14 passes an agent's flat parameters,
  such as `openai_api_key` and `base_url`, to its LLM).
- `mock_openai.agent_calls[i]` → `agent_calls(llm)[i]`: what request i carried that request i-1 did not
  (request 0: the prompt; later ones: the tool observations). `mock_openai.call_args_list[-1]` (api_key,
  model) → the last request's Authorization header and `model`.
- Knowledge bases embed with MindsDB's `dummy_embeddings` (see test_mdb_executor_knowledge_base.py);
  `save_file` uploads the DataFrame; `set_handler` is a real postgres table.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pandas as pd
import pytest

from tests.compat.mdb import MindsDB, MindsDBTestBase, P, SQLError, agent_calls
from tests.compat.stubs import Reply, text, tool_call


def get_dataset_planets() -> pd.DataFrame:
    data = [
        ["1000", "Moon"],
        ["1001", "Jupiter"],
        ["1002", "Venus"],
    ]
    return pd.DataFrame(data, columns=["id", "planet_name"])


def _action(name: str, action_input: str = "") -> Reply:
    """MindsDB's `_action` (ReAct text "Action: <name> / Action Input: <input>") as a tool call."""
    return tool_call(name, action_input)


class TestAgent(MindsDBTestBase):
    def set_openai_completion(self, response: str | Reply | list[str | Reply]) -> None:
        """MindsDB's `set_openai_completion(mock_openai, response)`: the replies in order, then the last
        one again for every further request."""
        replies = [
            r if isinstance(r, Reply) else text(r)
            for r in (response if isinstance(response, list) else [response])
        ]
        self.llm.script(*replies, *[replies[-1]] * 20)

    def ask_agent(self, *actions: Reply) -> list[str]:
        """Scripts the LLM to take `actions` and then answer "Hi!", asks my_agent a question; the texts the
        agent sent the LLM, call by call."""
        self.set_openai_completion([*actions, "Hi!"])
        self.run_sql("select * from my_agent where question = 'test'")
        return agent_calls(self.llm)

    def create_agent(self, data: str) -> None:
        """CREATE AGENT my_agent on gpt-3.5-turbo at the scripted LLM, with `data` (the inside of its
        `data = {...}`: the knowledge bases and tables it may use)."""
        self.run_sql(f"""
            CREATE AGENT my_agent
            USING
              model = "gpt-3.5-turbo",
              openai_api_key='--',
              base_url='{self.url}',
              data = {{
                 {data}
              }}
         """)

    def create_openai_agent(self, api_key: str) -> None:
        """CREATE AGENT my_agent with the flat provider / model / openai_api_key options, at the scripted LLM."""
        self.run_sql(f"""
            CREATE AGENT my_agent
            USING
             provider='openai',
             model = "gpt-3.5-turbo",
             openai_api_key='{api_key}',
             base_url='{self.url}',
             prompt_template="Answer the user input in a helpful way"
         """)

    def model_dict(self, model_name: str, api_key: str) -> str:
        """An agent's `model = {...}` in SQL: `model_name` of the scripted LLM (provider openai), `api_key`."""
        return f"""{{
                "provider": 'openai',
                "model_name": "{model_name}",
                "api_key": '{api_key}',
                "base_url": '{self.url}'
              }}"""

    @contextmanager
    def default_llm_app(self, fresh_app: Any, agent_response: str) -> Iterator[None]:
        """Scripts the LLM to answer `agent_response` and runs the SQL of the block on a new agentkb whose
        default model is MindsDB's `default_llm` of the default-LLM tests (at the scripted LLM)."""
        default_llm = {
            "provider": "openai",
            "model_name": "gpt-4o",
            "api_key": "sk-abc123",
            "base_url": self.url,
            "api_version": "2024-02-01",
            "method": "multi-class",
        }
        self.set_openai_completion(agent_response)

        with (
            fresh_app(default_model=default_llm) as app,
            httpx.Client(base_url=app.url, timeout=120) as client,
        ):
            self.mdb = MindsDB(client, self.embeddings)
            yield

    @property
    def url(self) -> str:
        return self.llm.base_url

    def embedding_model(self, **fields: Any) -> str:
        # MindsDB: {"provider": "bedrock", "model_name": "titan"} with LLMClient patched
        return json.dumps(self.embeddings.mindsdb_model(**fields))

    # --------------------------------------------------------------------------------------------------

    def test_openai_provider(self) -> None:
        """Origin: test_openai_provider, first part (MindsDB test_agent.py @v25.14.1)."""
        agent_response = "how can I assist you today?"
        self.set_openai_completion(agent_response)

        self.create_openai_agent("-key-")
        ret = self.run_sql("select * from my_agent where question = 'hi'")

        # check model params
        assert self.llm.requests[-1].headers["authorization"] == "Bearer -key-"
        assert self.llm.requests[-1].body["model"] == "gpt-3.5-turbo"

        assert agent_response in ret.answer[0]

    def test_openai_provider__join(self) -> None:
        """Origin: test_openai_provider, "test join" and "empty query" (MindsDB @v25.14.1). The agent's model is
        given as a dict here, so that only the join is under test (the flat form is test_openai_provider)."""
        agent_response = "how can I assist you today?"
        self.set_openai_completion(agent_response)

        self.run_sql(f"""
            CREATE AGENT my_agent
            USING
             model = {{"provider": 'openai', "model_name": "gpt-3.5-turbo", "api_key": '-key-',
                       "base_url": '{self.url}'}},
             prompt_template="Answer the user input in a helpful way"
         """)

        # test join
        df = pd.DataFrame(
            [
                {"q": "hi"},
            ]
        )
        self.save_file("questions", df)

        ret = self.run_sql("""
            select * from files.questions t
            join my_agent a on a.question=t.q
        """)

        assert agent_response in ret.answer[0]

        # empty query
        ret = self.run_sql("""
            select * from files.questions t
            join my_agent a on a.question=t.q
            where t.q = ''
        """)
        assert len(ret) == 0

    def test_openai_params_as_dict(self) -> None:
        """Origin: test_openai_params_as_dict (MindsDB @v25.14.1)."""
        agent_response = "how can I assist you today?"
        self.set_openai_completion(agent_response)

        self.run_sql(f"""
            CREATE AGENT my_agent
            USING
             model = {self.model_dict("gpt-42", "-secret-")},
             prompt_template="Answer the user input in a helpful way"
         """)
        ret = self.run_sql("select * from my_agent where question = 'hi'")

        # check model params
        assert self.llm.requests[-1].headers["authorization"] == "Bearer -secret-"
        assert self.llm.requests[-1].body["model"] == "gpt-42"

        assert agent_response in ret.answer[0]

    def test_agent_with_default_llm_params(self, fresh_app: Any) -> None:
        """Origin: test_agent_with_default_llm_params (MindsDB @v25.14.1). MindsDB patches `Config.get` for
        `default_llm`; agentkb's setting for it is `default_model`, so an agentkb is started with it (its
        base_url is the stub). MindsDB's run-time checks patch `_initialize_args`; here the run must reach the
        stub with the merged parameters. The explicit agent's base_url (MindsDB: https://custom-url.com/, also
        never contacted thanks to the patches) is the stub under another host name."""
        custom_url = self.url.replace("127.0.0.1", "localhost")

        agent_response = "how can I assist you today?"
        with self.default_llm_app(fresh_app, agent_response):
            # Create an agent with only provider specified - should use default LLM params
            self.run_sql("""
                CREATE AGENT default_params_agent
                USING
                 provider='openai',
                 model='gpt-4o',
                 prompt_template="Answer the user input in a helpful way"
             """)

            # Check that the agent was created with the default parameters
            agent_info = self.run_sql(
                "SELECT * FROM information_schema.agents WHERE name = 'default_params_agent'"
            )

            # Verify model_name is set correctly
            assert agent_info["MODEL_NAME"].iloc[0] == "gpt-4o"

            # Verify the agent has the user-specified parameters but not default parameters
            agent_params = json.loads(agent_info["PARAMS"].iloc[0])
            assert agent_params.get("prompt_template") == "Answer the user input in a helpful way"

            # Default parameters should NOT be stored in the database
            # They will be applied at runtime via get_agent_llm_params
            assert "base_url" not in agent_params
            assert "api_version" not in agent_params
            assert "method" not in agent_params

            # Test that the agent works
            ret = self.run_sql("select * from default_params_agent where question = 'hi'")
            assert agent_response in ret.answer[0]
            # the runtime parameter merging is used (MindsDB: _initialize_args was called)
            assert self.llm.requests[-1].headers["authorization"] == "Bearer sk-abc123"

            # Now create an agent with explicit parameters that should override defaults
            self.run_sql(f"""
                CREATE AGENT explicit_params_agent
                USING
                 provider='openai',
                 model = "gpt-3.5-turbo",
                 base_url='{custom_url}',
                 prompt_template="Answer the user input in a helpful way"
             """)

            # Check that the agent was created with the explicit parameters
            agent_info = self.run_sql(
                "SELECT * FROM information_schema.agents WHERE name = 'explicit_params_agent'"
            )

            # Verify the agent has the explicit parameters (overriding defaults)
            agent_params = json.loads(agent_info["PARAMS"].iloc[0])
            assert agent_params.get("base_url") == custom_url  # Explicit value should be stored
            assert agent_params.get("prompt_template") == "Answer the user input in a helpful way"

            # Default parameters should NOT be stored in the database
            assert "api_version" not in agent_params
            assert "method" not in agent_params

            # Test that the agent works with explicit parameters
            self.llm.requests.clear()
            ret = self.run_sql("select * from explicit_params_agent where question = 'hi'")
            assert agent_response in ret.answer[0]
            assert self.llm.requests[-1].headers["host"].startswith("localhost")
            assert self.llm.requests[-1].body["model"] == "gpt-3.5-turbo"

    def test_agent_minimal_syntax_with_default_llm(self, fresh_app: Any) -> None:
        """Origin: test_agent_minimal_syntax_with_default_llm (MindsDB @v25.14.1); `default_llm` as in
        test_agent_with_default_llm_params."""
        agent_response = "response from minimal syntax agent"
        with self.default_llm_app(fresh_app, agent_response):
            # Create an agent with minimal syntax - should use all default LLM params
            self.run_sql("""
                CREATE AGENT minimal_syntax_agent
                USING
                  data = {
                    "tables": ['test.table1', 'test.table2']
                  }
             """)

            # Check that the agent was created with the default parameters
            agent_info = self.run_sql(
                "SELECT * FROM information_schema.agents WHERE name = 'minimal_syntax_agent'"
            )

            # Verify model_name is None (as expected when using default LLM)
            # spec difference: every agent record carries its model (spec 2.1, 4.1); agentkb records the
            # default model, so MODEL_NAME is the default's name
            assert agent_info["MODEL_NAME"].iloc[0] == "gpt-4o"

            # Verify the agent has the default parameters and include_tables
            agent_params = json.loads(agent_info["PARAMS"].iloc[0])
            assert "data" in agent_params
            assert agent_params["data"]["tables"] == ["test.table1", "test.table2"]

            # Test that the agent works
            ret = self.run_sql("select * from minimal_syntax_agent where question = 'hi'")
            assert agent_response in ret.answer[0]

    def test_agent_stream(self) -> None:
        """Origin: test_agent_stream (MindsDB @v25.14.1). MindsDB iterates
        `agents_controller.get_completion(agent, messages, stream=True)` in process; here the same messages go
        to `POST …/agents/my_agent/completions/stream` and the SSE chunks are read."""
        agent_response = "how can I assist you today?"
        self.set_openai_completion(agent_response)

        self.create_openai_agent("--")

        messages = [{"question": "hi"}]
        r = self.mdb.client.post(f"{P}/agents/my_agent/completions/stream", json={"messages": messages})
        assert r.status_code == 200, r.text
        chunks = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
        found = False
        for chunk in chunks:
            if chunk.get("output") == agent_response:
                found = True
        if not found:
            raise AttributeError("Agent response is not found")

    def test_drop_demo_agent(self) -> None:
        """Origin: test_drop_demo_agent, the agent part (MindsDB @v25.14.1; the skill part is not ported:
        agentkb has no skills). Adaptation: `is_demo` marks MindsDB's own demo objects; agentkb refuses it by
        name, as MindsDB 26.1 does (its AgentParams forbid other keys), so the CREATE is an error here."""
        with pytest.raises(SQLError, match="is_demo"):
            self.run_sql(f"""
                CREATE AGENT my_demo_agent
                USING
                    provider='openai',
                    model = "gpt-3.5-turbo",
                    openai_api_key='--',
                    base_url='{self.url}',
                    prompt_template="--",
                    is_demo=true;
             """)
        with pytest.raises(SQLError):  # MindsDB: ExecutorException
            self.run_sql("drop agent my_agent")

    def test_agent_default_prompt_template(self) -> None:
        """Origin: test_agent_default_prompt_template (MindsDB @v25.14.1)."""
        agent_response = "default prompt template response"
        self.set_openai_completion(agent_response)

        # Test non-retrieval mode with no prompt_template (should use default)
        self.run_sql(f"""
            CREATE AGENT default_prompt_agent
            USING
                provider='openai',
                model = "gpt-3.5-turbo",
                openai_api_key='--',
                base_url='{self.url}'
         """)
        ret = self.run_sql("select * from default_prompt_agent where question = 'test question'")
        assert agent_response in ret.answer[0]

        # Test retrieval mode with no prompt_template (should use default retrieval template)
        self.run_sql(f"""
            CREATE AGENT default_retrieval_agent
            USING
                provider='openai',
                model = "gpt-3.5-turbo",
                openai_api_key='--',
                base_url='{self.url}',
                mode='retrieval'
         """)
        ret = self.run_sql("select * from default_retrieval_agent where question = 'test question'")
        assert agent_response in ret.answer[0]

    # --- test_agent_permissions, one test per section ---------------------------------------------------

    def _permissions_setup(self, tables: bool = True) -> None:
        kb_sql = f"""
            create knowledge base %s
            using embedding_model = {self.embedding_model(model_name="titan")}
        """
        self.run_sql(kb_sql % "kb_show1")
        self.run_sql(kb_sql % "kb_show2")
        self.run_sql(kb_sql % "kb_hide")

        df = get_dataset_planets()

        self.save_file("show1", df)
        self.save_file("show2", df)
        self.save_file("hide", df)

        self.run_sql("""
            insert into kb_show1
            select id, planet_name content from files.show1
        """)

        data = (
            '"knowledge_bases": ["kb_show*"], "tables": ["files.show*"]'
            if tables
            else '"knowledge_bases": ["kb_show*"]'
        )
        self.create_agent(data)

    def test_agent_permissions__forbidden_kbs(self) -> None:
        """Origin: test_agent_permissions, "Access to forbidden KBs" (MindsDB @v25.14.1)."""
        self._permissions_setup()
        calls = self.ask_agent(
            _action("kb_info_tool", "kb_hide"),
            _action("kb_query_tool", "select * from kb_hide where content='Moon'"),
        )

        # result of kb_info_tool
        assert "Knowledge base kb_hide not found" in calls[1]
        # it shows available KBs
        assert "kb_show*" in calls[1]

        # result of kb_query_tool
        assert "Knowledge base kb_hide not found" in calls[2]

    def test_agent_permissions__exposed_kbs(self) -> None:
        """Origin: test_agent_permissions, "Access to exposed KBs" (MindsDB @v25.14.1)."""
        self._permissions_setup()
        calls = self.ask_agent(
            _action("kb_list_tool"),
            _action("kb_info_tool", "kb_show1"),
            _action("kb_query_tool", "select * from kb_show1 where content='Moon' limit 1"),
        )

        # result of kb_list_tool
        assert "kb_hide" not in calls[1]
        assert "kb_show1" in calls[1]
        assert "kb_show2" in calls[1]

        # result of kb_info_tool, shows KB name and info
        assert "kb_show1" in calls[2]
        assert "Sample Data" in calls[2]
        assert "Schema Information" in calls[2]

        # result of kb_query_tool
        assert "Moon" in calls[3]

    def test_agent_permissions__forbidden_files(self) -> None:
        """Origin: test_agent_permissions, "access to forbidden files" (MindsDB @v25.14.1)."""
        self._permissions_setup()
        calls = self.ask_agent(
            _action("sql_db_schema", "files.hide"),
            _action("sql_db_query", "select * from files.hide"),
        )
        # result of sql_db_schema
        assert "hide not found" in calls[1]
        # result of sql_db_query
        assert "hide not found" in calls[2]
        # it shows available tables
        assert "show*" in calls[2]

    def test_agent_permissions__exposed_files(self) -> None:
        """Origin: test_agent_permissions, "access to exposed files" (MindsDB @v25.14.1)."""
        self._permissions_setup()
        calls = self.ask_agent(
            _action("sql_db_list_tables"),
            _action("sql_db_schema", "files.show1"),
            _action("sql_db_query", "select * from files.show1 where id = '1001'"),
        )

        # result of sql_db_list_tables
        assert "hide" not in calls[1]
        assert "show1" in calls[1]
        assert "show1" in calls[1]

        # result of sql_db_schema
        assert "show1" in calls[2]  # table name
        assert "planet_name" in calls[2]  # column
        assert "Moon" in calls[2]  # content

        # result of sql_db_query
        assert "Jupiter" in calls[3]

    def test_agent_permissions__recreated_without_tables(self) -> None:
        """Origin: test_agent_permissions, "autogenerated skill is removed when agent is dropped" (MindsDB
        @v25.14.1): an agent dropped and created again without tables lists no files tables."""
        self._permissions_setup()
        self.run_sql("DROP AGENT my_agent")

        self.create_agent('"knowledge_bases": ["kb_show*"]')

        assert "files" not in self.ask_agent(_action("sql_db_list_tables"))[1]

    # --- test_agent_new_syntax ------------------------------------------------------------------------

    def _new_syntax_setup(self) -> None:
        df = get_dataset_planets()
        # create 2 files and KBs
        for i in (1, 2):
            self.run_sql(f"""
                create knowledge base kb{i}
                using embedding_model = {self.embedding_model(model_name="titan")}
            """)
            self.save_file(f"file{i}", df)

            self.run_sql(f"""
                insert into kb{i}
                select id, planet_name content from files.file{i} where id != 1000
            """)

        self.run_sql(f"""
            CREATE AGENT my_agent
            USING
              model = {self.model_dict("gpt-42", "-secret-")},
              data = {{
                 "knowledge_bases": ["kb1"],
                 "tables": ["files.file1"]
              }},
              prompt_template='important user instruction №42'
         """)

    def _check_exposure(self, exposed: int, hidden: int, api_key: str, model: str, prompt: str) -> None:
        """Asks my_agent about kb{exposed}/file{exposed} (which it must see) and kb{hidden}/file{hidden} (which
        it must not), then checks the model params, the answer and the prompt template of the last call."""
        # exposed
        calls = self.ask_agent(
            _action("kb_info_tool", f"kb{exposed}"),
            _action("sql_db_schema", f"files.file{exposed}"),
        )
        assert "Jupiter" in calls[1]
        assert "Jupiter" in calls[2]  # column

        # not exposed
        self.set_openai_completion(
            [
                _action("kb_info_tool", f"kb{hidden}"),
                _action("sql_db_schema", f"files.file{hidden}"),
                "Hi!",
            ],
        )
        ret = self.run_sql("select * from my_agent where question = 'test'")
        calls = agent_calls(self.llm)
        assert f"kb{hidden} not found" in calls[1]
        assert f"file{hidden} not found" in calls[2]

        # check model params
        assert self.llm.requests[-1].headers["authorization"] == f"Bearer {api_key}"
        assert self.llm.requests[-1].body["model"] == model

        # check agent response
        assert "Hi!" in ret.answer[0]

        # check prompt template
        assert prompt in calls[0]

    def test_agent_new_syntax(self) -> None:
        """Origin: test_agent_new_syntax, up to "ALTER AGENT" (MindsDB @v25.14.1)."""
        self._new_syntax_setup()
        self._check_exposure(1, 2, "-secret-", "gpt-42", "important user instruction №42")

    def test_agent_new_syntax__alter_agent(self) -> None:
        """Origin: test_agent_new_syntax, section "ALTER AGENT" (MindsDB @v25.14.1)."""
        self._new_syntax_setup()

        # --- ALTER AGENT ---
        self.run_sql(f"""
            ALTER AGENT my_agent
            USING
              model = {self.model_dict("gpt-18", "-almost secret-")},
              data = {{
                 "knowledge_bases": ["kb2"],
                 "tables": ["files.file2"]
              }},
              prompt_template='important system prompt №37'
        """)
        self._check_exposure(2, 1, "-almost secret-", "gpt-18", "important system prompt №37")

    def test_agent_accept_wrong_quoting(self) -> None:
        """Origin: test_agent_accept_wrong_quoting (MindsDB @v25.14.1)."""
        self.run_sql(f"""
            create knowledge base kb1
            using embedding_model = {self.embedding_model(model_name="titan")}
        """)
        df = get_dataset_planets()

        self.save_file("file1", df)

        self.create_agent('"knowledge_bases": ["kb1"], "tables": ["files.file1", "files.file2.*"]')
        self.run_sql("""
            insert into kb1
            select id, planet_name content from files.file1
        """)

        # # exposed
        calls = self.ask_agent(
            _action("kb_query_tool", "SELECT * FROM `mindsdb.kb1` WHERE id = '1001'"),
            _action("sql_db_query", "SELECT * FROM `files.file1` WHERE id = '1001';"),
        )

        assert "Jupiter" in calls[1]
        assert "Jupiter" in calls[2]

    def test_3_part_table(self) -> None:
        """Origin: test_3_part_table (MindsDB @v25.14.1). MindsDB's mocked postgres handler (schema public,
        table planets) is a real postgres data source `pg` here."""
        df = get_dataset_planets()
        self.mdb.set_handler("pg", tables={"planets": df}, schema="public")

        self.create_agent('"tables": ["pg.public.*"]')

        calls = self.ask_agent(
            # test getting table info
            _action("sql_db_schema", "pg.public.planets"),
            # test wrong quoting
            _action("sql_db_query", "SELECT * FROM pg.public.planets WHERE id = '1000'"),
            _action("sql_db_query", "SELECT * FROM `pg.public`.planets WHERE id = '1000'"),
            _action("sql_db_query", "SELECT * FROM `pg.public`.`planets` WHERE id = '1000'"),
        )

        # result of sql_db_schema
        assert "planets" in calls[1]  # table name
        assert "Jupiter" in calls[1]  # column
        # results of sql_db_query
        assert "Moon" in calls[2]
        assert "Moon" in calls[3]
        assert "Moon" in calls[4]

    def test_agent_query_param_override(self) -> None:
        """Origin: test_agent_query_param_override (MindsDB @v25.14.1). MindsDB patches `run_agent` and checks
        that it received timeout=5; here the LLM answers after 8 s, so the per-query timeout of 5 s must cut
        the run (MindsDB 25.14's answer then reads "...within the allotted time (5 seconds)...")."""
        agent_response = "override test response"
        self.set_openai_completion(text(agent_response, delay=8))

        self.run_sql(
            f"""
            CREATE AGENT override_agent
            USING
                model = {{'provider': 'openai', 'model_name': 'gpt-4o', 'api_key': 'sk-override',
                          'base_url': '{self.url}'}},
                prompt_template = 'Answer questions',
                timeout = 60;
            """
        )

        started = time.monotonic()
        ret = self.run_sql(
            """
            SELECT * FROM override_agent
            WHERE question = 'How are you?'
            USING timeout=5;
            """
        )
        assert time.monotonic() - started < 8
        assert agent_response not in ret.answer[0]
        assert "5 seconds" in ret.answer[0]
