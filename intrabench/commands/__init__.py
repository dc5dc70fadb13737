"""CLI subcommand modules; each defines register(commands, groups)."""
