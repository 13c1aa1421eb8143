"""Use cases behind the HTTP API: validate, then read and write through `storage` in one transaction.

They live in rooms, each a subpackage whose `__init__` is its face (the names the doors may import):
`platform`, `catalog`, `jobs`, `ingest`, `retrieval`, `agents`, `sql`. `container` builds them all, `types`
names the values they hand out; the rooms' layering is in docs/architecture.md and pyproject.toml."""
