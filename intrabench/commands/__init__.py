"""CLI subcommand modules; each defines register(commands, groups). Modules whose names
start with an underscore are helpers shared by them (argument types)."""
