"""Ingestion: an insert request and its progress (`request`), the pipeline that chunks, diffs, embeds and
writes documents (`pipeline`), and the sources of documents: `files/` (uploaded files) and `crawl/` (web pages)."""
