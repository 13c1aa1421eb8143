"""Where a knowledge base's models (embedding and reranking) send requests, and how those requests are
authenticated, per provider: MindsDB's provider names and parameter spellings (`names`), Azure OpenAI's
deployments (`azure`), the Gemini API (`gemini`), Amazon Bedrock with AWS SigV4 (`aws`) and Snowflake Cortex
(`snowflake`). The embedders (`kb/embedders/`) and the reranker's chat (`kb/chat.py`) build their requests
from these; `kb/model_endpoints.py` lists the same endpoints for an import."""
