"""Ported from MindsDB `tests/unit/api/http/test_sql_query.py` @v26.1.0: the three `response_format`s of
`POST /api/sql/query`.

Adaptation: MindsDB patches its SQL proxy (`FakeMysqlProxy`) to answer `SELECT * FROM table` with a fixed table
(columns id, name, value; three rows). Here that table is an uploaded file and the query reads it:
`SELECT * FROM files.<name>`.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import httpx
import pandas as pd
import pytest

from tests.compat.mdb import df_json

QUERY = "SELECT * FROM files.sql_query_table"


@pytest.fixture(scope="module", autouse=True)
def mock_sql_answer(base_url: str) -> None:
    """MindsDB's `create_mock_sql_answer()`, as a file."""
    df = pd.DataFrame(
        [
            [1, "test1", 100],
            [2, "test2", 200],
            [3, "test3", 300],
        ],
        columns=["id", "name", "value"],
    )
    with httpx.Client(base_url=base_url) as client:
        r = client.put("/api/files/sql_query_table", files={"file": ("sql_query_table.json", df_json(df))})
        assert r.status_code == 200, r.text


def check_response(response_data: dict[str, Any]) -> None:
    # Check response structure for default format
    assert response_data["type"] == "table"
    assert "data" in response_data
    assert "column_names" in response_data
    assert "context" in response_data

    # Check data content
    assert response_data["column_names"] == ["id", "name", "value"]
    assert len(response_data["data"]) == 3
    assert response_data["data"][0] == [1, "test1", 100]
    assert response_data["data"][1] == [2, "test2", 200]
    assert response_data["data"][2] == [3, "test3", 300]


def query_as(client: httpx.Client, response_format: str) -> httpx.Response:
    """POSTs QUERY asking for `response_format` and checks that it is answered."""
    response = client.post(
        "/api/sql/query",
        json={
            "query": QUERY,
            "response_format": response_format,
        },
    )

    assert response.status_code == HTTPStatus.OK
    return response


def unified(lines: list[str]) -> dict[str, Any]:
    """The default format's response dict, built from a streamed header line and a data-rows line."""
    assert len(lines) > 1
    header = json.loads(lines[0])
    data_rows = json.loads(lines[1])

    return {
        "type": header["type"],
        "column_names": header["column_names"],
        "data": data_rows,
        "context": {},
    }


class TestSQLQueryResponseFormat:
    def test_query_default_format(self, client: httpx.Client) -> None:
        """Origin: TestSQLQueryResponseFormat.test_query_default_format (MindsDB @v26.1.0)."""
        response = client.post(
            "/api/sql/query",
            json={"query": QUERY},
        )

        assert response.status_code == HTTPStatus.OK
        response_data = response.json()
        check_response(response_data)

    def test_query_sse_format(self, client: httpx.Client) -> None:
        """Origin: TestSQLQueryResponseFormat.test_query_sse_format (MindsDB @v26.1.0)."""
        response = query_as(client, "sse")
        assert "text/event-stream" in response.headers["content-type"]

        # Parse SSE response and build unified response dict
        response_text = response.text
        lines = [
            line.replace("data: ", "") for line in response_text.split("\n") if line.startswith("data: ")
        ]
        check_response(unified(lines))

    def test_query_jsonlines_format(self, client: httpx.Client) -> None:
        """Origin: TestSQLQueryResponseFormat.test_query_jsonlines_format (MindsDB @v26.1.0)."""
        response = query_as(client, "jsonlines")
        assert response.headers["content-type"] == "application/jsonlines"

        # Parse JSONLINES response and build unified response dict
        response_text = response.text
        lines = [line for line in response_text.split("\n") if line.strip()]
        check_response(unified(lines))
