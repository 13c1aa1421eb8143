"""The knowledge-base engine: chunking, embedding, storage and hybrid search."""
