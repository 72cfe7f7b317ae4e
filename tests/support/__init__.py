"""What tests share that is not a fixture: documents, HTTP helpers, queue control, fake servers.

Fixtures live in ``tests/conftest.py``; a test imports helpers from here, never from another test
module or from a conftest.
"""
