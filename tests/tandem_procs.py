"""Process helpers shared by the integration tests: free ports and a `tandem serve`
process on 127.0.0.1 that is stopped by pid (never by name)."""
import json
import os
import re
import signal
import socket
import subprocess
import time

import openai
import requests


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `tandem serve` process on 127.0.0.1; stopped by pid (SIGTERM, then SIGKILL)."""

    def __init__(self, tandem_bin, model, args, tmp_path, name="serve", env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp_path / f"{name}.log"
        self._log = open(self.log_path, "wb")
        cmd = [tandem_bin, "serve", str(model), "--host", "127.0.0.1", "--port", str(self.port),
               "--kv-cache-memory", "256MiB", "--threads", "2", *args]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})))
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.log()}")
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("server did not become healthy: " + self.log())

    def log(self):
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def client(self, api_key="none"):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, timeout=60)

    def post(self, path, body, **kw):
        data = body if isinstance(body, (str, bytes)) else json.dumps(body)
        return requests.post(self.url + path, data=data, headers={"Content-Type": "application/json"},
                             timeout=60, **kw)

    def metric(self, name, **labels):
        """The value of the first series of `name` whose labels include `labels`."""
        text = requests.get(self.url + "/metrics", timeout=10).text
        for m in re.finditer(r"^" + re.escape(name) + r"\{([^}]*)\} (\S+)$", text, re.M):
            have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            if all(have.get(k) == v for k, v in labels.items()):
                return float(m.group(2))
        return None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode
