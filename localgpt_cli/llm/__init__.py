"""The one place that talks to Ollama (through the `ollama` client)."""
