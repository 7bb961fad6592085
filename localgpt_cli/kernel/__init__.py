"""The kernel: packets, normalizer, session, loop, context, strategy. Never imports click or rich."""
