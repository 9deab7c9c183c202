"""Process helpers shared by the integration tests: free ports and a `tandem serve`
process on 127.0.0.1 that is stopped by pid (never by name)."""
import json
import os
import random
import re
import signal
import socket
import subprocess
import time

import openai
import requests


# Test servers take ports below the kernel's ephemeral range (32768-60999 here), which
# outgoing connections draw source ports from: a port picked there can be taken by some
# client's connection before the server binds it.
_PORT_LOW, _PORT_HIGH = 20000, 32700
_rng = random.Random(os.getpid() ^ int(time.time() * 1000))
# Every port handed out by this process: a test asks for several ports before any is
# bound (a cluster file names six), so "free now" alone can give the same port twice.
_handed_out = set()


def ports_free(port, n=1):
    """Whether ports port..port+n-1 can all be bound on 127.0.0.1 now."""
    socks = []
    try:
        for p in range(port, port + n):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", p))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def free_port(n=1):
    """A port (the first of n consecutive ones) that nothing uses now, outside the
    ephemeral range, and that this process has not handed out before."""
    for _ in range(1000):
        port = _rng.randrange(_PORT_LOW, _PORT_HIGH - n)
        wanted = set(range(port, port + n))
        if not wanted & _handed_out and ports_free(port, n):
            _handed_out.update(wanted)
            return port
    raise RuntimeError("no free port")


SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer")


def sanitizer_report(log_text):
    """The first sanitizer report in a process log (with some context), or ''."""
    for marker in SANITIZER_MARKERS:
        at = log_text.find(marker)
        if at >= 0:
            return log_text[max(0, at - 200):at + 3000]
    return ""


class HttpProcess:
    """One tandem process serving HTTP on 127.0.0.1 (free port); ready when GET /health
    answers 200; stopped by pid (SIGTERM, then SIGKILL)."""

    def __init__(self, cmd_without_port, tmp_path, name, env=None, timeout=60, port=None, host="127.0.0.1"):
        self.name = name
        self.port = port or free_port()
        self.url = f"http://{host}:{self.port}"
        self.log_path = tmp_path / f"{name}.log"
        self._log = open(self.log_path, "ab")
        cmd = [*cmd_without_port, "--host", host, "--port", str(self.port)]
        full_env = dict(os.environ, **(env or {}))
        self.auth = self._auth_headers(self.command(cmd), full_env)
        self.proc = subprocess.Popen(self.command(cmd), stdout=self._log, stderr=subprocess.STDOUT,
                                     env=full_env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited {self.proc.returncode}: {self.log()}")
            try:
                if requests.get(self.url + "/health", headers=self.auth, timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{name} did not become healthy: " + self.log_path.read_text(errors="replace"))

    def command(self, cmd):
        """The final command line (subclasses append their flags)."""
        return cmd

    @staticmethod
    def _auth_headers(cmd, env):
        """The Bearer header a keyed process (--api-key or $VLLM_API_KEY) wants on every
        route, /health and /metrics included; {} when it has no key."""
        key = cmd[cmd.index("--api-key") + 1] if "--api-key" in cmd else env.get("VLLM_API_KEY")
        return {"Authorization": f"Bearer {key}"} if key else {}

    def log(self):
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def client(self, api_key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=60)

    def post(self, path, body, headers=None, **kw):
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        h = {"Content-Type": "application/json", **(headers or {})}
        return requests.post(self.url + path, data=data, headers=h, timeout=60, **kw)

    def metric(self, name, **labels):
        """The value of the first series of `name` whose labels include `labels`."""
        text = requests.get(self.url + "/metrics", headers=self.auth, timeout=10).text
        for m in re.finditer(r"^" + re.escape(name) + r"\{([^}]*)\} (\S+)$", text, re.M):
            have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            if all(have.get(k) == v for k, v in labels.items()):
                return float(m.group(2))
        return None

    def stop(self):
        """SIGTERM, then the exit code. Raises if the process's log holds a sanitizer
        report (./test.sh --full runs these tests against ASan/UBSan and TSan builds;
        a report printed at exit, such as a leak, must fail the test)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        report = sanitizer_report(self.log_path.read_text(errors="replace"))
        if report:
            raise AssertionError(f"{self.name}: sanitizer report in {self.log_path}:\n{report}")
        return self.proc.returncode


class Server(HttpProcess):
    """One `tandem serve` process on 127.0.0.1."""

    def __init__(self, tandem_bin, model, args, tmp_path, name="serve", env=None, port=None):
        defaults = [d for flag, value in (("--kv-cache-memory", "256MiB"), ("--threads", "2"))
                    if flag not in args for d in (flag, value)]
        self._args = [*defaults, *args]
        super().__init__([tandem_bin, "serve", str(model)], tmp_path, name, env=env, port=port)

    def command(self, cmd):
        return [*cmd, *self._args]
