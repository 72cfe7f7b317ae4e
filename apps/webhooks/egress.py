"""Outbound HTTP that cannot be pointed at the platform's own network (SSRF).

The check runs where the connection is made, on the addresses DNS actually returned, and the
socket connects to exactly the address that was checked: a name that resolves to a public
address for a pre-check and to 127.0.0.1 a moment later (DNS rebinding) gains nothing. Every
address a name resolves to must pass, or none is tried. TLS still verifies the original host name
(httpcore passes the URL's host as server_hostname). Redirects are not followed.

A client may carry a total deadline (``guarded_client(..., deadline=)``): every connect, TLS
handshake, read and write is given only the time left before it, so a receiver that sends one
byte every few seconds (each read well inside a per-read timeout) is cut off at the deadline.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from urllib.parse import urlsplit

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


# Extra networks one tenant's callbacks may reach (its Tenant.webhook_allow_nets): looked up by the
# layer that knows tenants, which installs the lookup at startup (apps.api's AppConfig.ready).
def _no_tenant_nets(tenant: str) -> list[str]:
    return []


tenant_allow_nets: Callable[[str], list[str]] = _no_tenant_nets


def parse_nets(values: Iterable[str]) -> list[Network]:
    return [ipaddress.ip_network(v.strip(), strict=False) for v in values if v.strip()]


NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052 well-known prefix: the last 32 bits are IPv4
NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # RFC 8215 local-use prefix
IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated ::a.b.c.d


def carried_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries: a gateway or the host's own stack may deliver
    a connection to them (mapped, compatible, NAT64, 6to4, Teredo's server and client)."""
    low32 = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    carried = []
    if ip.ipv4_mapped:
        carried.append(ip.ipv4_mapped)
    # :: and ::1 sit in ::/96 but are the unspecified and loopback addresses, judged as such.
    if (ip in IPV4_COMPATIBLE and int(ip) > 1) or ip in NAT64 or ip in NAT64_LOCAL:
        carried.append(low32)
    if ip.sixtofour:
        carried.append(ip.sixtofour)
    if ip.teredo:
        carried.extend(ip.teredo)
    return carried


def refused(address: str, allow: Sequence[Network]) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if any(ip in net for net in allow):
        return False
    if isinstance(ip, ipaddress.IPv6Address) and (carried := carried_ipv4(ip)):
        # Judged by what it carries: 64:ff9b::a9fe:a9fe is the metadata service behind NAT64.
        return any(refused(str(v4), allow) for v4 in carried)
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


class Deadline:
    """A moment (``time.monotonic``) after which no network operation may wait."""

    def __init__(self, at: float | None) -> None:
        self.at = at

    def clamp(self, timeout: float | None, timeout_error: type[Exception]) -> float | None:
        if self.at is None:
            return timeout
        left = self.at - time.monotonic()
        if left <= 0:
            raise timeout_error("the delivery's total deadline has passed")
        return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every wait ends by the deadline, however the peer trickles its bytes."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: Deadline) -> None:
        self.stream = stream
        self.deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.stream.read(max_bytes, self.deadline.clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.stream.write(buffer, self.deadline.clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.stream.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore.NetworkStream:
        left = self.deadline.clamp(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self.stream.start_tls(ssl_context, server_hostname, left), self.deadline)

    def get_extra_info(self, info: str):
        return self.stream.get_extra_info(info)


class _GuardedBackend(httpcore.SyncBackend):
    def __init__(self, allow: Sequence[Network], deadline: Deadline) -> None:
        self.allow = list(allow)
        self.deadline = deadline

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        last: Exception | None = None
        for address in resolve_checked(host, port, self.allow):
            try:
                left = self.deadline.clamp(timeout, httpcore.ConnectTimeout)
                stream = super().connect_tcp(address, port, left, local_address, socket_options)
                return _DeadlineStream(stream, self.deadline)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        raise last or httpcore.ConnectError(f"no address for {host}")


class GuardedTransport(httpx.HTTPTransport):
    def __init__(self, allow: Sequence[Network], deadline: float | None = None) -> None:
        super().__init__(trust_env=False)
        # The pool httpx built, rebuilt with our backend (httpx exposes no network_backend option).
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=10,
            network_backend=_GuardedBackend(allow, Deadline(deadline)),
        )


def guarded_client(allow: Sequence[Network], timeout: float, deadline: float | None = None) -> httpx.Client:
    """An ``httpx.Client`` that refuses non-public addresses and ignores proxy environment
    variables; with a ``deadline`` (``time.monotonic``), nothing it does waits past it."""
    return httpx.Client(
        transport=GuardedTransport(allow, deadline), timeout=timeout, follow_redirects=False, trust_env=False
    )


def undeliverable(url: str, schemes: Sequence[str], ports: Sequence[int]) -> str | None:
    """Why a callback URL could never be delivered from where the workers run, or None.

    ``schemes`` and ``ports`` are what the deployment's egress lets out (OCR_WEBHOOK_SCHEMES,
    OCR_WEBHOOK_PORTS; empty: any). Checked at the door, so a URL the cluster's NetworkPolicy
    would drop is refused with a code rather than retried for hours and failed."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    except ValueError:
        return "callback_url is not a valid URL"
    scheme = parts.scheme.lower()
    if schemes and scheme not in {s.lower() for s in schemes}:
        return f"callback_url uses {scheme}; this deployment delivers webhooks over {', '.join(schemes)} only"
    if ports and port not in set(ports):
        return f"callback_url uses port {port}; this deployment delivers webhooks to port(s) {', '.join(map(str, ports))} only"
    return None
