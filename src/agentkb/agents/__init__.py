"""The agent: tools, providers, the run loop and its events."""
