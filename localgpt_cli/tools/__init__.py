"""Tools the agent loop can call: protocol, registry, selection, built-ins, plugins."""
