"""The kernel: packets, normalizer, session, loop, context. Never imports click or rich."""
