"""Model providers: the `Provider` protocol (provider.py) and the Ollama client that
implements it (ollama.py), the one place that talks to Ollama (through the `ollama` client)."""
