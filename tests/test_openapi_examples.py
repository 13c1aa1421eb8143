"""/openapi.json as a contract: every documented example validates against its schema, every operation
declares a typed success response and problem+json errors (OpenAI's error shape on `/v1`), request
bodies read from the raw request are declared (the knowledge-base DELETE's optional body, the import's
multipart form), no FastAPI 422."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

METHODS = ("get", "put", "post", "delete", "patch")
TYPED = {
    "type",
    "properties",
    "items",
    "anyOf",
    "oneOf",
    "allOf",
    "const",
    "enum",
}  # what makes a schema typed


def _spec() -> dict[str, Any]:
    from agentkb.app import create_app
    from agentkb.settings import Settings

    return create_app(Settings(database_url="postgresql://unused/unused", data_dir=Path("unused"))).openapi()


SPEC = _spec()


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SPEC["components"]["schemas"][schema["$ref"].split("/")[-1]]
    return schema


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({**schema, "components": SPEC["components"]})


def _examples() -> list[tuple[str, dict[str, Any], Any]]:
    """(where, schema, example) for every example in the document: in media types and in schemas."""
    found: list[tuple[str, dict[str, Any], Any]] = []
    for path, item in SPEC["paths"].items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            media = [("request", m) for m in op.get("requestBody", {}).get("content", {}).values()]
            media += [(code, m) for code, r in op["responses"].items() for m in r.get("content", {}).values()]
            for where, m in media:
                schema = m.get("schema")
                if schema is None:
                    continue
                label = f"{method.upper()} {path} {where}"
                values = [m["example"]] if "example" in m else []
                values += [e.get("value") for e in m.get("examples", {}).values()]
                values += _resolve(schema).get("examples", [])
                found += [(label, schema, v) for v in values]
    return found


EXAMPLES = _examples()


def test_there_are_examples_to_check() -> None:
    labels = {label for label, _, _ in EXAMPLES}
    for expected in (
        "POST /api/projects request",
        "POST /api/projects/{project_name}/knowledge_bases request",
        "PUT /api/projects/{project_name}/knowledge_bases/{kb_name} request",
        "POST /api/projects/{project_name}/knowledge_bases/{kb_name}/search request",
        "DELETE /api/projects/{project_name}/knowledge_bases/{kb_name} request",
        "POST /api/projects/{project_name}/agents/{agent_name}/completions request",
        "POST /api/login request",
    ):
        assert expected in labels, sorted(labels)


@pytest.mark.parametrize(("label", "schema", "example"), EXAMPLES, ids=[e[0] for e in EXAMPLES])
def test_example_matches_its_schema(label: str, schema: dict[str, Any], example: Any) -> None:
    _validator(schema).validate(example)


def test_a_wrong_example_is_caught() -> None:
    search = SPEC["paths"]["/api/projects/{project_name}/knowledge_bases/{kb_name}/search"]["post"]
    schema = search["requestBody"]["content"]["application/json"]["schema"]
    with pytest.raises(jsonschema.ValidationError):
        _validator(schema).validate({"query": "x", "limit": -1})
    with pytest.raises(jsonschema.ValidationError):
        _validator(schema).validate({"query": "x", "no_such_option": 1})


def test_every_operation_is_typed() -> None:
    for path, item in SPEC["paths"].items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            label = f"{method.upper()} {path}"
            responses = op["responses"]
            assert "422" not in responses, label
            successes = [code for code in responses if code.startswith("2")]
            assert successes, label
            for code in successes:
                content = responses[code].get("content", {})
                assert content or code == "204", f"{label} {code} declares no body"
                for media_type, m in content.items():
                    schema = m.get("schema", m.get("itemSchema"))
                    assert schema, f"{label} {code} {media_type} has no schema"
                    assert TYPED & _resolve(schema).keys(), (
                        f"{label} {code} {media_type}: untyped schema {schema}"
                    )
            for code, response in responses.items():
                if not code.startswith(("4", "5")):
                    continue
                # the OpenAI-compatible routes: OpenAI's error shape (or a problem); A2A: JSON-RPC's
                if path.startswith(("/v1/", "/a2a/")):
                    assert all(m["schema"] for m in response["content"].values()), label
                    continue
                ref = response["content"]["application/problem+json"]["schema"]["$ref"]
                assert ref == "#/components/schemas/Problem", label


def test_every_operations_group_is_listed_in_order() -> None:
    """The document lists every tag its operations use, in `OPENAPI_TAGS`' order (the routers are matched in
    another order, the SQL endpoint first), so that /docs shows the groups as the API reads."""
    used = {tag for item in SPEC["paths"].values() for op in item.values() for tag in op.get("tags", [])}
    listed = [tag["name"] for tag in SPEC["tags"]]
    assert used <= set(listed) and listed[:2] == ["status", "auth"], (used - set(listed), listed)
    assert next(iter(SPEC["paths"])) == "/api/sql/query"  # matched first: see create_app


def test_bodies_read_by_hand_are_declared() -> None:
    kb = SPEC["paths"]["/api/projects/{project_name}/knowledge_bases/{kb_name}"]["delete"]
    body = kb["requestBody"]
    assert body["required"] is False
    assert _resolve(body["content"]["application/json"]["schema"])["properties"].keys() >= {"ids", "filters"}
    imported = SPEC["paths"]["/api/projects/{project_name}/knowledge_bases/import"]["post"]
    form = imported["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert form["required"] == ["file"] and form["properties"]["file"]["format"] == "binary"
    assert {"201", "400", "404", "409", "413"} <= imported["responses"].keys()
    exported = SPEC["paths"]["/api/projects/{project_name}/knowledge_bases/{kb_name}/export"]["get"]
    assert exported["responses"]["200"]["content"]["application/gzip"]["schema"]["format"] == "binary"
    assert "application/json" not in exported["responses"]["200"]["content"]


def test_docs_pages_need_no_cdn(client: Any) -> None:
    """`/docs` and `/redoc` load their scripts from the server itself (package files), not from a CDN."""
    for page, assets in (
        ("/docs", ("/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css")),
        ("/redoc", ("/docs/assets/redoc.standalone.js",)),
    ):
        html = client.get(page)
        assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
        assert "http://" not in html.text and "https://" not in html.text, page
        for asset in assets:
            assert asset in html.text
            served = client.get(asset)
            assert served.status_code == 200 and len(served.content) > 10_000, asset
    assert client.get("/docs/oauth2-redirect").status_code == 200
