"""Records as they may leave the service layer: `fit_to_show(row)` is a copy of a knowledge base, data
source or agent row (or of a model configuration) with every secret masked (`secrecy.mask_secrets`:
`******`), so that the HTTP API's and the console's encoders never decide what is secret.

Rows the services return keep their secrets sealed (an agent's `model` revealed), because the services
pass them on to each other (an insert reveals its KB's embedding key, a query its data source's password);
they are made fit to show here, once, where they are encoded for a client.

The one exception is the spec's (§2.1): the API's agent record echoes its `model` whole, `api_key`
included (`echo_model=True`); its `params` are masked, and the console shows neither.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, overload

from agentkb.secrecy import mask_secrets
from agentkb.storage.agents import AgentRow
from agentkb.storage.data_sources import DataSourceRow
from agentkb.storage.knowledge_bases import KnowledgeBaseRow


@overload
def fit_to_show(row: KnowledgeBaseRow) -> KnowledgeBaseRow: ...
@overload
def fit_to_show(row: DataSourceRow) -> DataSourceRow: ...
@overload
def fit_to_show(row: AgentRow, *, echo_model: bool = False) -> AgentRow: ...
@overload
def fit_to_show(row: dict[str, Any]) -> dict[str, Any]: ...
def fit_to_show(row: Any, *, echo_model: bool = False) -> Any:
    if isinstance(row, KnowledgeBaseRow):
        return replace(
            row,
            embedding_model=mask_secrets(row.embedding_model),
            reranking_model=mask_secrets(row.reranking_model),
            params=mask_secrets(row.params),
        )
    if isinstance(row, DataSourceRow):
        return replace(row, parameters=mask_secrets(row.parameters))
    if isinstance(row, AgentRow):
        model = row.model if echo_model else mask_secrets(row.model)
        return replace(row, model=model, params=mask_secrets(row.params))
    if isinstance(row, dict):
        return mask_secrets(row)
    raise TypeError(f"no rule to show a {type(row).__name__}")
