"""Our own tables, as SQLAlchemy Core metadata. Migrations in `migrations/versions/` create them.

Each knowledge base also owns one chunk table (`kb_chunks_<id>`), made by `chunks.create_chunk_table`,
because pgvector's HNSW index needs one vector dimension per table.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData()

projects = Table(
    "projects",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("name", Text, nullable=False, unique=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

agents = Table(
    "agents",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("project_id", BigInteger, ForeignKey("projects.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("model", JSONB, nullable=False),
    Column("data", JSONB, nullable=False),
    Column("prompt_template", Text, nullable=True),
    Column("params", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("project_id", "name", name="agents_project_name_key"),
)

knowledge_bases = Table(
    "knowledge_bases",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("project_id", BigInteger, ForeignKey("projects.id"), nullable=False),
    Column("name", Text, nullable=False),
    Column("embedding_model", JSONB, nullable=False),
    Column("reranking_model", JSONB, nullable=True),
    Column("metadata_columns", JSONB, nullable=True),
    Column("content_columns", JSONB, nullable=True),
    Column("id_column", Text, nullable=True),
    Column("params", JSONB, nullable=False),
    Column("storage_table", Text, nullable=False),
    Column("vector_dim", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    # when the chunks last changed (updated_at: any change); versions the caches built from the chunks
    Column("content_version", DateTime(timezone=True), nullable=False, server_default=func.now()),
    UniqueConstraint("project_id", "name", name="knowledge_bases_project_name_key"),
)

chunk_vector_indexes = Table(  # per chunk table: rows with seq <= indexed_seq are in its HNSW index
    "chunk_vector_indexes",
    metadata,
    Column("storage_table", Text, primary_key=True),
    Column("indexed_seq", BigInteger, nullable=False, server_default="0"),
)
