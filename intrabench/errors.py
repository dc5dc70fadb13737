"""Errors that are the user's to fix: the CLI prints them as one line, never as a traceback."""


class UserError(Exception):
    """A mistake in the user's input (config, data, paths) with an actionable message."""


class ConfigError(UserError):
    """The run configuration is invalid."""


class DataError(UserError):
    """An image or label cannot be used (unreadable, wrong shape, NaN, grid mismatch...)."""
