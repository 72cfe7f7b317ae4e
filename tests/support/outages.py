"""Services behind the platform made unreachable from inside a test, as an outage makes them."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


def closed_port() -> int:
    with socket.socket() as sock:  # a port nothing listens on once the socket is closed
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def postgresql_unreachable() -> Iterator[None]:
    """Point the connection at a port nothing listens on: every query in between is refused, as
    while the server is down or restarting."""
    connection.close()
    saved = dict(connection.settings_dict)
    connection.settings_dict.update(HOST="127.0.0.1", PORT=str(closed_port()))
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
