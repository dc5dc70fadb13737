"""Fixtures the people tests share (each group's in its own module)."""

from .click_fixtures import click_run, click_site  # noqa: F401 - the click tests' run and site
