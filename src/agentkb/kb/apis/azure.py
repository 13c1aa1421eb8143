"""Azure OpenAI: a deployment of a resource, `{endpoint}/openai/deployments/{deployment}/{operation}
?api-version=…`, its key in the `api-key` header.

MindsDB's parameters (its `AzureOpenAI` client): `base_url` (the resource's endpoint,
`https://<resource>.openai.azure.com/`), `api_version`, `api_key`, `model_name` (which the SDK puts in the
path: the deployment's name); with `AZURE_OPENAI_ENDPOINT`, `AZURE_OPENAI_API_VERSION` and
`AZURE_OPENAI_API_KEY` from the environment when absent. agentkb also reads `azure_endpoint` for the
endpoint and `deployment` for a deployment named otherwise than the model. The environment's key goes only
to the environment's endpoint (the configuration gives none, or one on the same host).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from agentkb.credentials import url_host
from agentkb.kb.apis.names import AZURE, environment, http_url, required, text

ENV_KEY = "AZURE_OPENAI_API_KEY"
ENV_ENDPOINT = "AZURE_OPENAI_ENDPOINT"
ENV_VERSION = "AZURE_OPENAI_API_VERSION"


@dataclass(frozen=True, slots=True)
class AzureDeployment:
    endpoint: str  # https://<resource>.openai.azure.com, no trailing slash, no /openai
    deployment: str
    api_version: str
    api_key: str | None

    def url(self, operation: str) -> str:
        """`operation` (`embeddings`, `chat/completions`) of this deployment."""
        return (
            f"{self.endpoint}/openai/deployments/{quote(self.deployment, safe='')}/{operation}"
            f"?api-version={quote(self.api_version, safe='')}"
        )

    def headers(self) -> dict[str, str]:
        return {"api-key": self.api_key} if self.api_key else {}


def endpoint(config: Mapping[str, Any]) -> str | None:
    """The endpoint the configuration names (or the environment's), as given."""
    return text(config, "base_url", "azure_endpoint") or environment(ENV_ENDPOINT)


def deployment(config: Mapping[str, Any], field: str) -> AzureDeployment:
    given = text(config, "base_url", "azure_endpoint")
    env_endpoint = environment(ENV_ENDPOINT)
    url = given or env_endpoint
    if url is None:
        raise required(field, "base_url", AZURE, f"the resource's endpoint, or {ENV_ENDPOINT}")
    url = http_url(url, field, "base_url" if "base_url" in config or given is None else "azure_endpoint")
    url = url.removesuffix("/openai")
    version = text(config, "api_version") or environment(ENV_VERSION)
    if version is None:
        raise required(field, "api_version", AZURE, f"e.g. 2024-02-01, or {ENV_VERSION}")
    key = text(config, "api_key", "azure_openai_api_key")
    if key is None and (given is None or url_host(given) == url_host(env_endpoint)):
        key = environment(ENV_KEY)
    name = text(config, "deployment", "azure_deployment", "model_name")
    if name is None:
        raise required(field, "model_name", AZURE, "the deployment's name")
    return AzureDeployment(url, name, version, key)
