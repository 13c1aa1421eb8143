"""A knowledge base's chunking settings: MindsDB's `preprocessing` parameter, checked and read.

MindsDB (`interfaces/knowledge_base/preprocessing/models.py`) takes
`{"type": "text_chunking" | "json_chunking" | "contextual", "<type>_config": {...}}`. Every key MindsDB takes
is applied here or refused with a 400 naming it; MindsDB's pydantic models drop unknown keys silently and
accept some they never read, which agentkb refuses instead:

- `doc_id_column_name`: MindsDB always overwrites it with `_original_doc_id`, so only that value is taken;
- `length_function`: a Python callable, which JSON cannot carry;
- `json_chunking_config.chunk_size` / `chunk_overlap`: the JSON chunker splits by object or field, never by
  size (MindsDB accepts both and reads neither);
- a `<type>_config` beside another `type` (MindsDB validates it and uses the type's own config).

agentkb's own flat `params.chunk_size` / `params.chunk_overlap` apply when `preprocessing` gives none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentkb.credentials import SETTING_KEYS as LLM_SETTING_KEYS
from agentkb.errors import BadRequest

TEXT = "text_chunking"
JSON = "json_chunking"
CONTEXTUAL = "contextual"
TYPES = (TEXT, JSON, CONTEXTUAL)
CONFIG_KEYS = {TEXT: "text_chunking_config", JSON: "json_chunking_config", CONTEXTUAL: "contextual_config"}
SOURCES = {
    TEXT: "TextChunkingPreprocessor",
    JSON: "JSONChunkingPreprocessor",
    CONTEXTUAL: "ContextualPreprocessor",
}

DEFAULT_CHUNK_SIZE = 1000  # MindsDB's defaults
DEFAULT_CHUNK_OVERLAP = 200
MAX_CHUNK_SIZE = 100_000
DOC_ID_COLUMN = "_original_doc_id"  # the only `doc_id_column_name` MindsDB ends up using
DEFAULT_LLM_MODEL = "gpt-4o"  # MindsDB's LLMConfig default (provider openai)
MAX_TEMPLATE_CHARS = 20_000
TITLE = "Invalid preprocessing configuration"

_COMMON = ("chunk_size", "chunk_overlap", "doc_id_column_name")
_JSON_FLAGS = ("flatten_nested", "include_metadata", "chunk_by_object", "extract_all_primitives")
_JSON_LISTS = ("exclude_fields", "include_fields", "metadata_fields")
_KEYS = {
    TEXT: (*_COMMON, "separators"),
    JSON: ("doc_id_column_name", *_JSON_FLAGS, *_JSON_LISTS, "nested_delimiter", "content_column"),
    CONTEXTUAL: (*_COMMON, "llm_config", "context_template", "summarize"),
}
_REFUSED = {
    "length_function": "it is a Python function, which a JSON setting cannot carry; chunk sizes count characters",
}
_JSON_REFUSED = (
    "json_chunking makes one chunk per JSON object (or per field with chunk_by_object = false) and never "
    "splits by size; MindsDB accepts and ignores it. Leave it out"
)
_LLM_KEYS = ("provider", "model_name", "params", "timeout", *LLM_SETTING_KEYS)
_CREDENTIAL = re.compile(r".*(api_key|api_base|api_url|base_url|organization)$")
PLACEHOLDER = re.compile(r"\{(WHOLE_DOCUMENT|CHUNK_CONTENT)\}")


@dataclass(frozen=True, slots=True)
class JSONOptions:
    """MindsDB's `JSONChunkingConfig` (its defaults)."""

    flatten_nested: bool = True
    include_metadata: bool = True
    chunk_by_object: bool = True
    exclude_fields: tuple[str, ...] = ()
    include_fields: tuple[str, ...] = ()
    metadata_fields: tuple[str, ...] = ()
    extract_all_primitives: bool = False
    nested_delimiter: str = "."
    content_column: str = "content"


@dataclass(frozen=True, slots=True)
class ContextualOptions:
    """MindsDB's `ContextualConfig`: `llm` is `llm_config` flattened (its `params` laid under its own keys),
    as stored (its secrets may be sealed); `template` None is MindsDB's default prompt."""

    llm: dict[str, Any] = field(default_factory=dict)
    template: str | None = None
    summarize: bool = False


@dataclass(frozen=True, slots=True)
class ChunkingConfig:
    chunk_size: int = DEFAULT_CHUNK_SIZE
    chunk_overlap: int = DEFAULT_CHUNK_OVERLAP
    kind: str = TEXT
    separators: tuple[str, ...] | None = None  # given: MindsDB's own TextSplitter (kb.text_splitter)
    json: JSONOptions | None = None
    contextual: ContextualOptions | None = None

    @property
    def default(self) -> bool:
        """agentkb's default chunking (semantic-text-splitter), whose fingerprints predate the other kinds."""
        return self.kind == TEXT and self.separators is None

    def describe(self) -> Any:
        """What the chunks depend on beyond size and overlap (no secrets), for fingerprints."""
        if self.json is not None:
            return [self.kind, [getattr(self.json, name) for name in self.json.__slots__]]
        if self.contextual is not None:
            llm = self.contextual.llm
            model = [llm.get("provider"), llm.get("model_name"), llm.get("base_url")]
            return [self.kind, model, self.contextual.template, self.contextual.summarize]
        return [self.kind, list(self.separators or ())]


def _refuse(where: str, why: str) -> BadRequest:
    return BadRequest(f"'{where}' is not supported: {why}", title=TITLE)


def _int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadRequest(f"'{where}' must be an integer", title=TITLE)
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise BadRequest(f"'{where}' must be true or false", title=TITLE)
    return value


def _text(value: Any, where: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or (not value and not empty):
        raise BadRequest(f"'{where}' must be a non-empty string", title=TITLE)
    return value


def _strings(value: Any, where: str, *, empty_items: bool = False) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and (v or empty_items) for v in value):
        raise BadRequest(f"'{where}' must be a list of strings", title=TITLE)
    return tuple(value)


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise BadRequest(f"'{where}' must be a JSON object", title=TITLE)
    return dict(value)


def _check_keys(given: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in given:
        if key in _REFUSED:
            raise _refuse(f"{where}.{key}", _REFUSED[key])
        if key not in allowed:
            raise BadRequest(
                f"'{where}.{key}' is not a setting of {where}; its settings are: {', '.join(allowed)}",
                title=TITLE,
            )


def _size(given: Mapping[str, Any], params: Mapping[str, Any], where: str) -> tuple[int, int]:
    def read(key: str, default: int) -> int:
        if given.get(key) is not None:
            return _int(given[key], f"{where}.{key}")
        return _int(params.get(key, default), key)

    size, overlap = read("chunk_size", DEFAULT_CHUNK_SIZE), read("chunk_overlap", DEFAULT_CHUNK_OVERLAP)
    if not 1 <= size <= MAX_CHUNK_SIZE:
        raise BadRequest(f"'chunk_size' must be in 1..{MAX_CHUNK_SIZE}", title=TITLE)
    if not 0 <= overlap < size:
        raise BadRequest("'chunk_overlap' must be ≥ 0 and smaller than 'chunk_size'", title=TITLE)
    return size, overlap


def _doc_id_column(given: Mapping[str, Any], where: str) -> None:
    value = given.get("doc_id_column_name")
    if value is not None and value != DOC_ID_COLUMN:
        raise _refuse(
            f"{where}.doc_id_column_name",
            f"the document id is always kept in metadata as '{DOC_ID_COLUMN}' (MindsDB overwrites any other "
            f"value with it too); got {value!r}",
        )


def _json_options(given: Mapping[str, Any], where: str) -> JSONOptions:
    for key in ("chunk_size", "chunk_overlap"):
        if key in given:
            raise _refuse(f"{where}.{key}", _JSON_REFUSED)
    _check_keys(given, _KEYS[JSON], where)
    _doc_id_column(given, where)
    values: dict[str, Any] = {}
    for key in _JSON_FLAGS:
        if given.get(key) is not None:
            values[key] = _bool(given[key], f"{where}.{key}")
    for key in _JSON_LISTS:
        if given.get(key) is not None:
            values[key] = _strings(given[key], f"{where}.{key}")
    for key in ("nested_delimiter", "content_column"):
        if given.get(key) is not None:
            values[key] = _text(given[key], f"{where}.{key}")
    return JSONOptions(**values)


def llm_model(given: Any, where: str) -> dict[str, Any]:
    """MindsDB's `llm_config` (`{model_name, provider, params: {...}}`) as one flat model object, its keys
    checked: the provider, the model name, credentials (`api_key`, `base_url`, `<provider>_api_key`, ...) and
    sampling settings (`temperature`, `max_tokens`, ...)."""
    config = _object(given, where)
    nested = config.pop("params", None)
    flat = {**(_object(nested, f"{where}.params") if nested is not None else {}), **config}
    for key, value in flat.items():
        if key not in _LLM_KEYS and _CREDENTIAL.fullmatch(str(key)) is None:
            raise BadRequest(
                f"'{where}.{key}' is not a setting of an LLM; use provider, model_name, api_key, base_url and "
                f"{', '.join(LLM_SETTING_KEYS)} (in llm_config or in llm_config.params)",
                title=TITLE,
            )
        if key in ("provider", "model_name") and value is not None:
            _text(value, f"{where}.{key}")
    return {k: v for k, v in flat.items() if v is not None}


def _template(value: Any, where: str) -> str | None:
    if value is None:
        return None
    template = _text(value, where)
    if len(template) > MAX_TEMPLATE_CHARS:
        raise BadRequest(f"'{where}' must be at most {MAX_TEMPLATE_CHARS} characters", title=TITLE)
    if PLACEHOLDER.search(template) is None:
        raise BadRequest(
            f"'{where}' must contain {{WHOLE_DOCUMENT}} and/or {{CHUNK_CONTENT}}: the text the LLM situates",
            title=TITLE,
        )
    return template


def _contextual_options(given: Mapping[str, Any], where: str) -> ContextualOptions:
    _check_keys(given, _KEYS[CONTEXTUAL], where)
    _doc_id_column(given, where)
    llm = llm_model(given.get("llm_config") or {}, f"{where}.llm_config")
    summarize = given.get("summarize") is not None and _bool(given["summarize"], f"{where}.summarize")
    return ContextualOptions(
        llm, _template(given.get("context_template"), f"{where}.context_template"), summarize
    )


def _text_options(given: Mapping[str, Any], where: str) -> tuple[str, ...] | None:
    _check_keys(given, _KEYS[TEXT], where)
    _doc_id_column(given, where)
    if given.get("separators") is None:
        return None
    separators = _strings(given["separators"], f"{where}.separators", empty_items=True)
    if not separators:
        raise BadRequest(f"'{where}.separators' must list at least one separator", title=TITLE)
    return separators


def chunking_config(params: Mapping[str, Any]) -> ChunkingConfig:
    """The chunking of a knowledge base with these `params`: `params.preprocessing` (MindsDB's), else the
    flat `chunk_size` / `chunk_overlap`; each setting checked (400 naming the first wrong one)."""
    given = params.get("preprocessing")
    preprocessing = _object(given, "preprocessing") if given is not None else {}
    allowed = ("type", *CONFIG_KEYS.values())
    _check_keys(preprocessing, allowed, "preprocessing")
    kind = preprocessing.get("type") or TEXT
    if kind not in TYPES:
        raise BadRequest(
            f"'preprocessing.type' {kind!r} is not supported; use one of: {', '.join(TYPES)}", title=TITLE
        )
    for other, key in CONFIG_KEYS.items():
        if other != kind and preprocessing.get(key) is not None:
            raise BadRequest(
                f"'preprocessing.{key}' applies with type '{other}' only, and this preprocessing is of type "
                f'\'{kind}\': set "type": "{other}" or leave it out',
                title=TITLE,
            )
    where = f"preprocessing.{CONFIG_KEYS[kind]}"
    options = _object(preprocessing.get(CONFIG_KEYS[kind]) or {}, where)
    if kind == JSON:
        return ChunkingConfig(kind=JSON, json=_json_options(options, where))
    size, overlap = _size(options, params, where)
    if kind == CONTEXTUAL:
        return ChunkingConfig(size, overlap, CONTEXTUAL, contextual=_contextual_options(options, where))
    return ChunkingConfig(size, overlap, TEXT, separators=_text_options(options, where))
