"""Contextual chunking's LLM (MindsDB's `ContextualPreprocessor`): each chunk's context, written by the
knowledge base's `contextual_config.llm_config` model through the agents' provider machinery (its key only
to its own server: `credentials.llm_config`; every request through the guarded HTTP client).

Contexts are cached in `chunk_contexts` by model, template, document and chunk (`kb.contextual.cache_key`):
re-inserting unchanged text (or retrying a failed insert) asks the LLM nothing. They are written as soon as
they are answered, on a connection of their own, so a failed insert keeps what it paid for. The prompts a
batch still needs are sent at once, `CONCURRENCY` at a time. A failed request fails the insert (502, the
key masked); MindsDB 26.1 stores the chunk with an empty context instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from agentkb.agents.providers import (
    MissingCredentials,
    ModelClient,
    ProviderContext,
    ask_model,
    build_model,
    model_settings,
)
from agentkb.credentials import llm_config
from agentkb.errors import BadRequest, UpstreamError
from agentkb.kb import contextual
from agentkb.kb.chunking import Chunk, content_hash
from agentkb.kb.documents import Document
from agentkb.kb.preprocessing import DEFAULT_LLM_MODEL, ContextualOptions
from agentkb.secrecy import mask_text, secret_values
from agentkb.storage import chunk_contexts
from agentkb.storage.db import Database

CONCURRENCY = 8
WHERE = "preprocessing.contextual_config.llm_config"


def contextual_model(given: Mapping[str, Any], default: Mapping[str, Any]) -> dict[str, Any]:
    """The model that writes contexts: the server's default model without `llm_config`; else `llm_config`,
    of provider `openai` unless it names one (MindsDB's `LLMConfig` default), over the default model when
    that has the same provider; model `gpt-4o` (MindsDB's default) for `openai` when nothing names one. Its
    key and base URL are chosen by `credentials.llm_config`. 400 for the keyless `extractive` model."""
    chosen = dict(given)
    if not chosen:
        chosen = {"provider": default.get("provider")}
    elif not chosen.get("provider"):
        chosen["provider"] = "openai"
    model = llm_config(chosen, default=default)
    if model.get("provider") == "extractive":
        raise BadRequest(
            f"Contextual preprocessing needs an LLM to write each chunk's context, and '{WHERE}' names none "
            "(the server's default model is 'extractive', no LLM): give "
            f"'{WHERE}': {{'provider': 'openai', 'model_name': …, 'api_key': …}}",
            title="No LLM",
        )
    if not model.get("model_name"):
        if model.get("provider") != "openai":
            raise BadRequest(f"'{WHERE}.model_name' is required", title="Invalid preprocessing configuration")
        model["model_name"] = DEFAULT_LLM_MODEL
    return model


class KBContexts:
    """The contexts of one insert's chunks (`ingest.pipeline.ChunkContexts`)."""

    def __init__(
        self,
        db: Database,
        kb_id: int,
        options: ContextualOptions,
        model: dict[str, Any],
        http: ModelClient,
    ) -> None:
        self.db = db
        self.kb_id = kb_id
        self.options = options
        self.model = model
        self.model_id = contextual.model_identity(model)
        try:
            self.llm = build_model(ProviderContext(model=model, http_client=http.client()))
        except MissingCredentials as exc:
            raise BadRequest(f"{exc} ('{WHERE}')", title="No LLM") from exc
        self.settings = model_settings(model)
        self.gate = asyncio.Semaphore(CONCURRENCY)
        self.asked = 0  # prompts sent to the LLM (the others came from the cache)

    async def add_contexts(self, pairs: list[tuple[Document, Chunk]]) -> None:
        documents: dict[int, str] = {}
        keys: list[str] = []
        for doc, chunk in pairs:
            if id(doc) not in documents:
                documents[id(doc)] = content_hash(doc.content)
            keys.append(
                contextual.cache_key(self.model_id, self.options, documents[id(doc)], chunk.content_hash)
            )
        async with self.db.read() as conn:
            known = await chunk_contexts.get_many(conn, self.kb_id, sorted(set(keys)))
        wanted: dict[str, tuple[Document, Chunk]] = {}
        for key, pair in zip(keys, pairs, strict=True):
            if key not in known:
                wanted.setdefault(key, pair)
        if wanted:
            answers = await asyncio.gather(*(self._ask(doc, chunk) for doc, chunk in wanted.values()))
            fresh = dict(zip(wanted, answers, strict=True))
            async with self.db.autocommitted() as conn:
                await chunk_contexts.put_many(conn, self.kb_id, fresh)
            known.update(fresh)
        for key, (_, chunk) in zip(keys, pairs, strict=True):
            chunk.content = contextual.with_context(self.options, known[key], chunk.content)
            chunk.content_hash = content_hash(chunk.content)

    async def _ask(self, doc: Document, chunk: Chunk) -> str:
        prompt = contextual.prompt(self.options, doc.content, chunk.content)
        async with self.gate:
            self.asked += 1
            try:
                answer = await ask_model(self.llm, prompt, self.settings)
            except Exception as exc:  # the providers raise many kinds of errors
                raise UpstreamError(
                    mask_text(
                        f"The LLM {self.model.get('model_name')!r} ({WHERE}) failed to write the context of a "
                        f"chunk of document {doc.doc_id}: {type(exc).__name__}: {exc}",
                        secret_values(self.model),
                    ),
                    title="LLM error",
                ) from exc
        return answer.strip()


class ChunkContextService:
    """Builds each contextual insert's `KBContexts`: the model resolved over the server's default."""

    def __init__(self, db: Database, default_model: Mapping[str, Any], http: ModelClient) -> None:
        self.db = db
        self.default_model = dict(default_model)
        self.http = http

    def for_kb(self, kb_id: int, options: ContextualOptions) -> KBContexts:
        """`options.llm` revealed (its secrets in clear)."""
        return KBContexts(
            self.db, kb_id, options, contextual_model(options.llm, self.default_model), self.http
        )
