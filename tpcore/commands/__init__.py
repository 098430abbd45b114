"""CLI subcommand modules; each exposes ``register(subparsers)``."""
