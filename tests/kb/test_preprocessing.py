"""MindsDB's `preprocessing` read and applied (pure code): its settings checked by name, MindsDB's own text
splitter for `separators`, its JSON chunker, and the contextual prompt. The expected pieces are what MindsDB
26.1's `TextSplitter` and `JSONChunkingPreprocessor` make of the same input."""

from __future__ import annotations

import json

import pytest

from agentkb.errors import BadRequest
from agentkb.kb import contextual
from agentkb.kb.chunking import chunk_document, chunking_config, source_fingerprint
from agentkb.kb.documents import ColumnSpec, row_documents
from agentkb.kb.json_chunking import PARSE_ERROR, JSONChunker
from agentkb.kb.preprocessing import JSON, ChunkingConfig, ContextualOptions, JSONOptions
from agentkb.kb.text_splitter import CannotSplit, split


def _doc(content: str, **metadata: object):  # type: ignore[no-untyped-def]
    [doc] = row_documents([{"id": "D1", "content": content, **metadata}], ColumnSpec())
    return doc


# --- MindsDB's text splitter (`separators`) -------------------------------------------------------------------
def test_separators_split_as_mindsdb_does() -> None:
    text = "alpha beta gamma.\n\ndelta epsilon zeta eta theta.\n\niota kappa"
    pieces = split(text, 30, 5, ("\n\n", "\n", " ", ""))
    # MindsDB: "alpha beta gamma." ends before the blank line; the next ends at the single "\n" in its reach
    assert [p for _, p in pieces] == ["alpha beta gamma.", "delta epsilon zeta eta theta.", "\niota kappa"]
    for start, piece in pieces:
        assert text[start : start + len(piece)] == piece


def test_blank_separators_overlap_back_to_a_stronger_one() -> None:
    """A chunk ending at a space restarts the next at the stronger separator behind it, when that is within
    `chunk_overlap`: MindsDB's overlap."""
    text = "one two three.\nfour five six seven eight nine ten"
    pieces = split(text, 25, 20, ("\n", " ", ""))
    assert [p for _, p in pieces] == ["one two three.", "four five six seven", "eight nine ten"]
    text = "aaaa bbbb.\ncccc dddd eeee ffff gggg"
    overlapping = split(text, 22, 15, ("\n", " ", ""))
    assert [p for _, p in overlapping] == ["aaaa bbbb.\ncccc dddd", "cccc dddd eeee ffff", "gggg"]
    # the first ended at a space, so the second starts after the newline behind it: they overlap
    assert overlapping[1][0] == len("aaaa bbbb.\n") and text.index("gggg") == overlapping[2][0]


def test_separators_that_never_occur_cannot_split() -> None:
    with pytest.raises(CannotSplit, match="separators"):
        split("x" * 100, 10, 0, ("|",))
    assert [p for _, p in split("x" * 25, 10, 0, ("|", ""))] == ["x" * 10, "x" * 10, "x" * 5]


def test_separator_chunks_have_mindsdb_ids_and_offsets() -> None:
    text = "abc def ghi\n\n\n\n\n\n\n\n\n\n\n\njkl mno"
    settings = {"chunk_size": 12, "chunk_overlap": 0, "separators": ["\n\n", ""]}
    config = chunking_config({"preprocessing": {"text_chunking_config": settings}})
    chunks = chunk_document(_doc(text), config, "t")
    # MindsDB's pieces: "abc def ghi\n", 9 newlines, "jkl mno"; the blank one is counted in `of n`, then skipped
    assert [c.content for c in chunks] == ["abc def ghi\n", "jkl mno"]
    first, last = chunks
    assert first.chunk_id == "D1:content:1of3:0to12" and first.metadata["_chunk_index"] == 0
    start = text.index("jkl")
    assert last.chunk_id == f"D1:content:3of3:{start}to{start + 7}" and last.metadata["_chunk_index"] == 2
    assert last.metadata["_start_char"] == start and last.metadata["_source"] == "TextChunkingPreprocessor"


# --- JSON chunking --------------------------------------------------------------------------------------------
def test_json_list_makes_one_chunk_per_object() -> None:
    content = json.dumps([{"name": "Ann", "info": {"age": 3, "tags": ["a", "b"]}}, {"name": "Bo"}, 7, [1, 2]])
    pieces = JSONChunker(JSONOptions()).pieces("D1", content)
    assert [p.content for p in pieces] == [
        "name: Ann\ninfo.age: 3\ninfo.tags: a, b",
        "name: Bo",
        "7",
        "[1, 2]",
    ]
    assert [p.chunk_id for p in pieces] == [
        "D1:content:1of4:0to37",
        "D1:content:2of4:0to8",
        "D1:content:3of4:0to1",
        "D1:content:4of4:0to6",
    ]
    assert pieces[0].metadata == {"field_name": "Ann"}  # top-level primitives (MindsDB's default)
    assert pieces[2].metadata == {}


def test_json_options() -> None:
    data = {"id": 5, "title": "Lamp", "specs": {"watts": 40, "colour": None}, "parts": [{"n": "bulb"}]}
    content = json.dumps(data)
    by_field = JSONChunker(JSONOptions(chunk_by_object=False, exclude_fields=("id",))).pieces("K", content)
    assert [p.content for p in by_field] == [
        "title: Lamp",
        "specs.watts: 40",
        "parts:\n  Item 1:\n    n: bulb",
    ]
    assert by_field[1].metadata == {"field_name": "specs", "field_id": 5, "field_title": "Lamp"}
    assert by_field[0].chunk_id == "K:content:1of3:0to11"
    nested = JSONChunker(JSONOptions(flatten_nested=False, include_fields=("title", "specs"))).pieces(
        "K", content
    )
    assert nested[0].content == json.dumps(
        {"title": "Lamp", "specs": {"watts": 40, "colour": None}}, indent=2
    )
    picked = JSONChunker(
        JSONOptions(metadata_fields=("specs__watts", "title"), nested_delimiter="__", content_column="body")
    ).pieces("K", content)
    assert picked[0].metadata == {"field_specs__watts": 40, "field_title": "Lamp"}
    assert picked[0].chunk_id.startswith("K:body:1of1:")
    every = JSONChunker(JSONOptions(extract_all_primitives=True)).pieces("K", content)[0].metadata
    assert every == {
        "field_id": 5,
        "field_title": "Lamp",
        "field_specs.watts": 40,
        "field_parts[0].n": "bulb",
    }


def test_json_python_literals_and_errors() -> None:
    assert JSONChunker(JSONOptions()).pieces("D", "{'a': 1}")[0].content == "a: 1"  # ast.literal_eval
    for text in ("not json at all", "null"):
        [error] = JSONChunker(JSONOptions()).pieces("D", text)
        assert error.chunk_id == "D_error" and error.content == f"Error processing document: {PARSE_ERROR}"


def test_json_chunks_carry_the_bookkeeping_metadata() -> None:
    doc = _doc(json.dumps([{"a": 1}, {"a": 2}]), tag="t")
    config = chunking_config({"preprocessing": {"type": "json_chunking"}})
    chunks = chunk_document(doc, config, "2026-01-01 00:00:00")
    assert [c.metadata["field_a"] for c in chunks] == [1, 2]
    meta = chunks[1].metadata
    assert meta["_chunk_index"] == 1 and meta["_source"] == "JSONChunkingPreprocessor" and meta["tag"] == "t"
    assert meta["_original_doc_id"] == "D1" and meta["_content_column"] == "content"
    assert "_start_char" not in meta  # MindsDB's JSON chunks have no offsets
    bare = chunking_config(
        {"preprocessing": {"type": "json_chunking", "json_chunking_config": {"include_metadata": False}}}
    )
    assert "tag" not in chunk_document(doc, bare, "t")[0].metadata


# --- the settings, checked by name ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "preprocessing, named",
    [
        ({"type": "semantic"}, "preprocessing.type"),
        ({"colour": 1}, "preprocessing.colour"),
        ({"text_chunking_config": {"chunk_sise": 5}}, "text_chunking_config.chunk_sise"),
        ({"text_chunking_config": {"length_function": "len"}}, "length_function"),
        ({"text_chunking_config": {"separators": "\n"}}, "separators"),
        ({"text_chunking_config": {"separators": []}}, "separators"),
        ({"text_chunking_config": {"doc_id_column_name": "id"}}, "doc_id_column_name"),
        ({"json_chunking_config": {}}, "json_chunking_config"),
        (
            {"type": "json_chunking", "json_chunking_config": {"chunk_size": 100}},
            "json_chunking_config.chunk_size",
        ),
        (
            {"type": "json_chunking", "json_chunking_config": {"flatten": True}},
            "json_chunking_config.flatten",
        ),
        ({"type": "json_chunking", "json_chunking_config": {"flatten_nested": "yes"}}, "flatten_nested"),
        ({"type": "contextual", "contextual_config": {"llm_config": {"vendor": "x"}}}, "llm_config.vendor"),
        (
            {"type": "contextual", "contextual_config": {"context_template": "no placeholder"}},
            "context_template",
        ),
        ({"type": "contextual", "contextual_config": {"summarise": True}}, "contextual_config.summarise"),
        ({"type": "contextual", "text_chunking_config": {"chunk_size": 5}}, "text_chunking_config"),
    ],
)
def test_every_unknown_or_unused_setting_is_refused_by_name(
    preprocessing: dict[str, object], named: str
) -> None:
    with pytest.raises(BadRequest, match=named.replace(".", r"\.")) as raised:
        chunking_config({"preprocessing": preprocessing})
    assert raised.value.status == 400


def test_settings_read() -> None:
    assert chunking_config({"preprocessing": {"type": "json_chunking"}}) == ChunkingConfig(
        kind=JSON, json=JSONOptions()
    )
    config = chunking_config(
        {
            "preprocessing": {
                "type": "contextual",
                "contextual_config": {
                    "chunk_size": 300,
                    "llm_config": {
                        "model_name": "m",
                        "provider": "openai",
                        "params": {"api_key": "k", "temperature": 0},
                    },
                    "summarize": True,
                    "doc_id_column_name": "_original_doc_id",
                },
            }
        }
    )
    assert config.chunk_size == 300 and config.contextual is not None and config.contextual.summarize
    assert config.contextual.llm == {
        "api_key": "k",
        "temperature": 0,
        "model_name": "m",
        "provider": "openai",
    }


def test_fingerprints_change_with_the_chunking_and_stay_for_the_default() -> None:
    docs = [_doc("some text")]
    default = source_fingerprint(docs, ChunkingConfig())
    assert default == source_fingerprint(docs, chunking_config({}))
    separated = chunking_config({"preprocessing": {"text_chunking_config": {"separators": ["\n", ""]}}})
    json_config = chunking_config({"preprocessing": {"type": "json_chunking"}})
    assert len({default, source_fingerprint(docs, separated), source_fingerprint(docs, json_config)}) == 3


# --- contextual: the prompt ------------------------------------------------------------------------------------
def test_contextual_prompt_escapes_tags_and_fills_a_template() -> None:
    options = ContextualOptions()
    text = contextual.prompt(options, "whole <document> text", "a <CHUNK> piece")
    assert "<document>\nwhole &lt;document&gt; text\n</document>" in text
    assert "<chunk>\na &lt;CHUNK&gt; piece\n</chunk>" in text
    assert text.endswith("Answer only with the succinct context and nothing else.")
    custom = ContextualOptions(template="Doc: {WHOLE_DOCUMENT} | Part: {CHUNK_CONTENT} | {other}")
    assert contextual.prompt(custom, "{CHUNK_CONTENT}", "p") == "Doc: {CHUNK_CONTENT} | Part: p | {other}"
    assert contextual.with_context(options, "ctx", "chunk") == "ctx\n\nchunk"
    assert contextual.with_context(ContextualOptions(summarize=True), "ctx", "chunk") == "ctx"
