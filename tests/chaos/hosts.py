"""Worker hosts for the chaos harness: each in a network namespace of its own, with its own address.

A host is a namespace (``ip netns add``) joined to the machine by a veth pair: the machine's end
has ``10.<net>.<n>.1`` (the host's gateway: Redis and PostgreSQL listen there too), the host's
end ``10.<net>.<n>.2``. Its workers run under ``ip netns exec`` and reach Redis and PostgreSQL
only through that link, by the gateway address. A partition drops every packet between the host
and the gateway (netfilter rules inside the host's own namespace, so nothing of the machine's
own network is touched) and heals by deleting exactly those rules: TCP connections stall, as
when a switch or a security group cuts a node off, rather than being reset.

Everything created here is named with this run's process id and removed by ``destroy``. It needs
root (``ip netns``); ``available()`` says whether this machine can do it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def available() -> str:
    """Empty when worker hosts can be made here; else why not."""
    if os.geteuid() != 0:
        return "worker hosts need root (ip netns)"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"worker hosts need {tool}"
    return ""


@dataclass
class WorkerHost:
    index: int
    run_tag: str  # this run's own tag (its pid), in every name it creates
    net: int  # the second octet of the 10.x.0.0/16 this run's hosts use
    cut_off: bool = False

    @property
    def name(self) -> str:
        return f"host{self.index}"

    @property
    def netns(self) -> str:
        return f"ocrchaos-{self.run_tag}-{self.index}"

    @property
    def veth_outside(self) -> str:
        return f"oc{self.run_tag}h{self.index}"[:15]

    @property
    def veth_inside(self) -> str:
        return f"oc{self.run_tag}n{self.index}"[:15]

    @property
    def gateway(self) -> str:
        return f"10.{self.net}.{self.index}.1"

    @property
    def address(self) -> str:
        return f"10.{self.net}.{self.index}.2"

    def create(self) -> None:
        _ip("netns", "add", self.netns)
        _ip("link", "add", self.veth_outside, "type", "veth", "peer", "name", self.veth_inside)
        _ip("link", "set", self.veth_inside, "netns", self.netns)
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.veth_outside)
        _ip("link", "set", self.veth_outside, "up")
        inside = ("netns", "exec", self.netns, "ip")
        _ip(*inside, "addr", "add", f"{self.address}/24", "dev", self.veth_inside)
        _ip(*inside, "link", "set", self.veth_inside, "up")
        _ip(*inside, "link", "set", "lo", "up")

    def command(self, cmd: list[str]) -> list[str]:
        """``cmd`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.netns, *cmd]

    def _rules(self, action: str) -> None:
        for chain, flag in (("INPUT", "-s"), ("OUTPUT", "-d")):
            subprocess.run(
                self.command(["iptables", action, chain, flag, self.gateway, "-j", "DROP"]),
                check=True,
                capture_output=True,
            )

    def cut(self) -> None:
        """Drop every packet between this host and Redis/PostgreSQL (both behind the gateway)."""
        self._rules("-I")
        self.cut_off = True

    def heal(self) -> None:
        if self.cut_off:
            self._rules("-D")
            self.cut_off = False

    def destroy(self) -> None:
        # Deleting one end of a veth pair deletes both; the namespace goes with its last process.
        subprocess.run(["ip", "link", "del", self.veth_outside], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True, check=False)
