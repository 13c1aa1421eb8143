"""Use cases behind the HTTP API: validate, then read and write through `storage` in one transaction."""
