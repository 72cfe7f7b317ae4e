"""Outbound HTTP that cannot be pointed at the platform's own network (SSRF).

The check runs where the connection is made, on the addresses DNS actually returned, and the
socket connects to exactly the address that was checked: a name that resolves to a public
address for a pre-check and to 127.0.0.1 a moment later (DNS rebinding) gains nothing. Every
address a name resolves to must pass, or none is tried. TLS still verifies the original host name
(httpcore passes the URL's host as server_hostname). Redirects are not followed.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence

import httpcore
import httpx

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AddressRefused(Exception):
    def __init__(self, host: str, address: str) -> None:
        super().__init__(
            f"{host} resolves to {address}, which is not a public address (loopback, private, link-local, "
            "metadata or reserved); an operator may allow it with OCR_WEBHOOK_ALLOW_NETS"
        )
        self.host = host
        self.address = address


class ResolveFailed(Exception):
    pass


def parse_nets(values: Iterable[str]) -> list[Network]:
    return [ipaddress.ip_network(v.strip(), strict=False) for v in values if v.strip()]


def refused(address: str, allow: Sequence[Network]) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if any(ip in net for net in allow):
        return False
    # is_global is False for loopback, RFC 1918, link-local (169.254.169.254, the cloud metadata
    # service), CGNAT (100.64/10, Alibaba's metadata), ULA (fd00:ec2::254), reserved, unspecified.
    return not ip.is_global or ip.is_multicast


def resolve_checked(host: str, port: int, allow: Sequence[Network]) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ResolveFailed(f"cannot resolve {host}: {exc}") from exc
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    for address in addresses:
        if refused(address, allow):
            raise AddressRefused(host, address)
    return addresses


class _GuardedBackend(httpcore.SyncBackend):
    def __init__(self, allow: Sequence[Network]) -> None:
        self.allow = list(allow)

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        last: Exception | None = None
        for address in resolve_checked(host, port, self.allow):
            try:
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last or httpcore.ConnectError(f"no address for {host}")


class GuardedTransport(httpx.HTTPTransport):
    def __init__(self, allow: Sequence[Network]) -> None:
        super().__init__(trust_env=False)
        # The pool httpx built, rebuilt with our backend (httpx exposes no network_backend option).
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=10,
            network_backend=_GuardedBackend(allow),
        )


def guarded_client(allow: Sequence[Network], timeout: float) -> httpx.Client:
    """An ``httpx.Client`` that refuses non-public addresses and ignores proxy environment variables."""
    return httpx.Client(transport=GuardedTransport(allow), timeout=timeout, follow_redirects=False, trust_env=False)
