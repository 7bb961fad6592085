"""localgpt: a local-first command line for Ollama that speaks NDJSON."""

__version__ = "0.1.0"

# Bumped only for breaking changes to the output contract (see README, "Output contract").
PROTOCOL_VERSION = 2
