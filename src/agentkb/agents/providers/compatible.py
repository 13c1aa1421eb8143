"""OpenAI-compatible servers under MindsDB's other provider names, over Chat Completions: `vllm`,
`nvidia_nim`, `litellm` (a LiteLLM proxy) and `writer`.

MindsDB's parameters and defaults (its `get_llm_config` and pydantic-ai model factory): the key as
`api_key` or `<provider>_api_key` (`writer_api_key`; vLLM: `openai_api_key`, no key needed: `EMPTY`); the
server as `base_url`, or `openai_api_base` (vLLM), `nvidia_nim_base_url`, `litellm_api_base`; vLLM and
NVIDIA NIM default to a local server on port 8000 (`http://localhost:8000/v1`, here 127.0.0.1). LiteLLM:
MindsDB's default is its own hosted server, agentkb's a local LiteLLM proxy (`http://127.0.0.1:4000`), so a
key never leaves for a server nobody named. Writer: `https://api.writer.com/v1` (MindsDB 26 refuses the
provider for agents). Environment keys (`NVIDIA_NIM_API_KEY`, `LITELLM_API_KEY`, `WRITER_API_KEY`) go only to
the default server (`credentials.llm_config`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkb.agents.providers.base import ProviderContext, register
from agentkb.agents.providers.openai import PLACEHOLDER_KEY, chat_model

if TYPE_CHECKING:
    from pydantic_ai.models import Model

VLLM_BASE_URL = "http://127.0.0.1:8000/v1"
VLLM_KEY = "EMPTY"  # MindsDB's key for vLLM servers started without one
NVIDIA_NIM_BASE_URL = "http://127.0.0.1:8000/v1"
LITELLM_BASE_URL = "http://127.0.0.1:4000"
WRITER_BASE_URL = "https://api.writer.com/v1"


@register("vllm")
def vllm_model(context: ProviderContext) -> Model:
    return chat_model(context, context.base_url or VLLM_BASE_URL, context.api_key or VLLM_KEY)


@register("nvidia_nim")
def nvidia_nim_model(context: ProviderContext) -> Model:
    return chat_model(context, context.base_url or NVIDIA_NIM_BASE_URL, context.api_key or PLACEHOLDER_KEY)


@register("litellm")
def litellm_model(context: ProviderContext) -> Model:
    return chat_model(context, context.base_url or LITELLM_BASE_URL, context.api_key or PLACEHOLDER_KEY)


@register("writer")
def writer_model(context: ProviderContext) -> Model:
    key = context.require_api_key("WRITER_API_KEY")
    return chat_model(context, context.base_url or WRITER_BASE_URL, key)
