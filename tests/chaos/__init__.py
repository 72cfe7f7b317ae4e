"""Fault tests of the whole stack (``make test-chaos``): see ``tests/chaos/__main__.py``."""
