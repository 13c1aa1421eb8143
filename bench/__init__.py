"""agentkb's benchmark harness: `python -m bench <name>`."""
