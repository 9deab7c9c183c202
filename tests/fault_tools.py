"""Tools for the fault tests (tests/test_faults.py): a network namespace joined to the
root namespace by a veth pair, iptables rules inside it, and a TCP relay that delays
every byte by a fixed time (these kernels have no `tc netem`).

The veth's two addresses are a /30 of link-local 169.254.213.0/24 (away from
169.254.169.254) that no address or route of this host covers yet, checked before
anything is added; the only route added is that /30's, so traffic to any other address
is untouched and the test's traffic stays between its own namespaces."""
import atexit
import ipaddress
import json
import os
import select
import socket
import subprocess
import threading
import time


def run(*cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
    return r


def netns_available():
    """Whether this process may create namespaces, veths and iptables rules."""
    if os.geteuid() != 0:
        return False
    name = f"tndprobe{os.getpid() % 100000}"
    try:
        run("ip", "netns", "add", name)
        run("ip", "netns", "exec", name, "iptables", "-L", "-n")
        return True
    except (RuntimeError, FileNotFoundError, subprocess.TimeoutExpired):
        return False
    finally:
        run("ip", "netns", "del", name, check=False)


_LIVE = set()


def _cleanup_all():
    for ns in list(_LIVE):
        ns.close()


atexit.register(_cleanup_all)


def _free_subnet():
    """A /30 of 169.254.213.0/24 that overlaps no address or route of this host."""
    used = []
    for line in json.loads(run("ip", "-j", "-4", "route", "show", "table", "all").stdout or "[]"):
        dst = line.get("dst", "default")
        if dst not in ("default",):
            try:
                used.append(ipaddress.ip_network(dst if "/" in dst else dst + "/32", strict=False))
            except ValueError:
                pass
    for link in json.loads(run("ip", "-j", "-4", "addr").stdout or "[]"):
        for a in link.get("addr_info", []):
            used.append(ipaddress.ip_network(f"{a['local']}/{a['prefixlen']}", strict=False))
    for net in ipaddress.ip_network("169.254.213.0/24").subnets(new_prefix=30):
        if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
            return net
    raise RuntimeError("no free /30 in 169.254.213.0/24")


class Netns:
    """Namespace `name` with lo up and a veth to the root namespace: the root side gets
    the first address of a free link-local /30, the namespace side the second."""

    def __init__(self, index=0):
        tag = f"{os.getpid() % 10000}{index}"
        self.name = f"tnd{tag}"
        self.root_dev, self.ns_dev = f"tva{tag}", f"tvb{tag}"
        self.close()  # leftovers of a killed run with the same pid
        hosts = list(_free_subnet().hosts())
        self.root_ip, self.ip = str(hosts[0]), str(hosts[1])
        _LIVE.add(self)
        run("ip", "netns", "add", self.name)
        try:
            self.exec("ip", "link", "set", "lo", "up")
            run("ip", "link", "add", self.root_dev, "type", "veth", "peer", "name", self.ns_dev)
            run("ip", "link", "set", self.ns_dev, "netns", self.name)
            run("ip", "addr", "add", f"{self.root_ip}/30", "dev", self.root_dev)
            run("ip", "link", "set", self.root_dev, "up")
            self.exec("ip", "addr", "add", f"{self.ip}/30", "dev", self.ns_dev)
            self.exec("ip", "link", "set", self.ns_dev, "up")
        except Exception:
            self.close()
            raise

    def prefix(self):
        """Command prefix that runs a program inside the namespace (exec'd: same pid)."""
        return ["ip", "netns", "exec", self.name]

    def exec(self, *cmd, check=True):
        return run(*self.prefix(), *cmd, check=check)

    def iptables(self, *rule):
        """Adds a rule (`-A CHAIN ...`); returns the matching delete command."""
        self.exec("iptables", *rule)
        return ["-D", *rule[1:]]

    def link(self, up):
        run("ip", "link", "set", self.root_dev, "up" if up else "down")

    def close(self):
        run("ip", "link", "del", self.root_dev, check=False)
        run("ip", "netns", "del", self.name, check=False)
        _LIVE.discard(self)


class DelayRelay:
    """Listens on (host, port) and relays each connection to `upstream`, delivering every
    chunk `delay` seconds after it arrived, in order, in both directions (a link with
    `delay` of one-way latency and no bandwidth limit of its own)."""

    def __init__(self, host, port, upstream, delay):
        self.upstream, self.delay = upstream, delay
        self.listener = socket.create_server((host, port))
        self.stopped = threading.Event()
        self.conns = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _accept(self):
        while not self.stopped.is_set():
            r, _, _ = select.select([self.listener], [], [], 0.1)
            if not r:
                continue
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self.conns += [client, server]
            for src, dst in ((client, server), (server, client)):
                self._pump(src, dst)

    def _pump(self, src, dst):
        chunks, cv = [], threading.Condition()

        def reader():
            while True:
                try:
                    data = src.recv(65536)
                except OSError:
                    data = b""
                with cv:
                    chunks.append((time.monotonic() + self.delay, data))
                    cv.notify()
                if not data:
                    return

        def writer():
            while True:
                with cv:
                    while not chunks:
                        cv.wait()
                    due, data = chunks.pop(0)
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    try:
                        dst.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    return
                try:
                    dst.sendall(data)
                except OSError:
                    return

        threading.Thread(target=reader, daemon=True).start()
        threading.Thread(target=writer, daemon=True).start()

    def close(self):
        self.stopped.set()
        self.acceptor.join(5)
        self.listener.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass
