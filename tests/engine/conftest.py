"""Fixtures for engine tests: the out-of-tree toy family's fixtures live in tests/conftest.py
(the CLI tests use them too)."""
