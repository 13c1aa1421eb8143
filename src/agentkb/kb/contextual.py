"""MindsDB's contextual chunking (`ContextualPreprocessor`), the parts that need no LLM: the prompt that asks
for a chunk's context, the cache key of its answer, and the chunk's text once the context is known.

MindsDB's prompt (its `DEFAULT_CONTEXT_TEMPLATE`) gives the LLM the whole document and the chunk, their
`<document>` / `<chunk>` tags escaped inside them; the answer is prepended to the chunk
(`"{context}\\n\\n{chunk}"`), or replaces it with `summarize`. A `context_template` is used as given, its
`{WHOLE_DOCUMENT}` and `{CHUNK_CONTENT}` filled in (MindsDB 26.1 reads the setting but always sends its
default template).
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Mapping
from typing import Any

from agentkb.credentials import SETTING_KEYS
from agentkb.kb.preprocessing import PLACEHOLDER, ContextualOptions

DEFAULT_TEMPLATE = """
<document>
{WHOLE_DOCUMENT}
</document>
Here is the chunk we want to situate within the whole document
<chunk>
{CHUNK_CONTENT}
</chunk>
Please give a short succinct context to situate this chunk within the overall document for the purposes of improving search retrieval of the chunk. Answer only with the succinct context and nothing else."""  # noqa: E501 (MindsDB's text)

_TAGS = re.compile(r"</?document>|</?chunk>", re.IGNORECASE)
PROMPT_VERSION = "1"  # part of every cache key: a change to the prompt's making asks the LLM again


def _escaped(text: str) -> str:
    return _TAGS.sub(lambda match: html.escape(match.group(0)), text)


def prompt(options: ContextualOptions, document: str, chunk: str) -> str:
    """The user message asking for the context of `chunk` within `document`."""
    values = {"WHOLE_DOCUMENT": _escaped(document), "CHUNK_CONTENT": _escaped(chunk)}
    return PLACEHOLDER.sub(lambda match: values[match.group(1)], options.template or DEFAULT_TEMPLATE)


def model_identity(model: Mapping[str, Any]) -> str:
    """What a context depends on in the model: its provider, name, server and sampling settings (no key)."""
    settings = [f"{k}={model[k]!r}" for k in SETTING_KEYS if model.get(k) is not None]
    return "\x1e".join(str(model.get(k) or "") for k in ("provider", "model_name", "base_url")) + repr(
        settings
    )


def cache_key(model_id: str, options: ContextualOptions, document_hash: str, chunk_hash: str) -> str:
    """The key of one context: the model (`model_identity`), the template, the document and the chunk."""
    parts = "\x1f".join((PROMPT_VERSION, model_id, options.template or "", document_hash, chunk_hash))
    return hashlib.blake2b(parts.encode(), digest_size=16).hexdigest()


def with_context(options: ContextualOptions, context: str, chunk: str) -> str:
    """The chunk's stored text: MindsDB's `f"{context}\\n\\n{chunk}"`, or the context alone (`summarize`)."""
    return context if options.summarize else f"{context}\n\n{chunk}"
