"""Inserting into knowledge bases: the ingest service (`service`), the steps every insert shares (`writer`),
partitioned SQL inserts (`partitions`), the rows of an insert's query (`query_sources`), the background
merges of new chunks into the HNSW index (`vector_merge`), and contextual chunking's LLM (`contexts`)."""

from agentkb.service.ingest.contexts import ChunkContextService
from agentkb.service.ingest.partitions import PartitionedInserts
from agentkb.service.ingest.query_sources import QuerySources
from agentkb.service.ingest.service import IngestService, started_jobs
from agentkb.service.ingest.vector_merge import VectorIndexMerger
from agentkb.service.ingest.writer import ChunkWriter

__all__ = [
    "ChunkContextService",
    "ChunkWriter",
    "IngestService",
    "PartitionedInserts",
    "QuerySources",
    "VectorIndexMerger",
    "started_jobs",
]
