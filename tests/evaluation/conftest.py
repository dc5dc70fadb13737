"""Fixtures for the evaluation tests."""
