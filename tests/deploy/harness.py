"""Real processes for the deployment tests: kmt-server replicas on loopback
ports, a Prometheus server scraping them, the kmt CLI, and plain HTTP."""
import atexit
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

SERVER = os.environ["KMT_SERVER_BINARY"]
CLI = os.environ["KMT_CLI"]
SOURCE_DIR = os.environ["KMT_SOURCE_DIR"]

# Every temporary file of a test run goes under one directory, removed when
# the run ends.
tempfile.tempdir = tempfile.mkdtemp(prefix="kmt-tests-")
atexit.register(shutil.rmtree, tempfile.tempdir, ignore_errors=True)


def wait_for(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def write_points(path, rows, d, k, seed, digits=6):
    """A CSV of `rows` points in d dimensions around k centers (c, ..., c)
    for c in 0..k-1, Gaussian noise of 0.3; the same file for a seed."""
    rng = random.Random(seed)
    with open(path, "w") as f:
        for _ in range(rows):
            c = rng.randrange(k)
            f.write(",".join(f"{c + rng.gauss(0, 0.3):.{digits}f}" for _ in range(d)) + "\n")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read(path):
    with open(path) as f:
        return f.read()


def http_get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


class Server:
    """kmt-server on free loopback ports (gRPC and metrics)."""

    def __init__(self, *flags):
        self.dir = tempfile.mkdtemp(prefix="kmt-server-")
        port_file = os.path.join(self.dir, "port")
        metrics_file = os.path.join(self.dir, "metrics_port")
        self.log = open(os.path.join(self.dir, "stderr"), "w")
        self.proc = subprocess.Popen(
            [SERVER, "--listen=127.0.0.1:0", f"--port_file={port_file}",
             "--metrics_listen=127.0.0.1:0", f"--metrics_port_file={metrics_file}",
             "--not_serving_delay=0s", *flags],
            stdout=subprocess.DEVNULL, stderr=self.log)
        wait_for(lambda: os.path.exists(port_file) or self.proc.poll() is not None,
                 what="the server to listen")
        if self.proc.poll() is not None:
            raise AssertionError(f"server exited: {read(self.log.name)}")
        self.port = int(read(port_file))
        self.metrics_port = int(read(metrics_file))
        self.address = f"127.0.0.1:{self.port}"

    def metrics(self):
        return http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")

    def batches(self):
        """kmt_batches_total summed over its labels, from /metrics."""
        total = 0.0
        for line in self.metrics().splitlines():
            if line.startswith("kmt_batches_total{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def drain(self):
        """SIGTERM, and returns once the port refuses connections: the drain
        has begun (at once with --not_serving_delay=0s), and every stream's
        next request is answered UNAVAILABLE."""
        self.proc.send_signal(signal.SIGTERM)

        def refused():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) != 0
        wait_for(refused, what="the server to drain")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.log.close()

    def stop(self):
        """SIGTERM; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


class Prometheus:
    """A real Prometheus server (Debian's package) scraping `targets` every
    second and evaluating the rule files `rules` every second."""

    def __init__(self, targets, rules=()):
        self.dir = tempfile.mkdtemp(prefix="kmt-prometheus-")
        config = os.path.join(self.dir, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    f"rule_files: {json.dumps(list(rules))}\n"
                    "scrape_configs:\n  - job_name: kmeans-transformer\n"
                    "    static_configs:\n"
                    f"      - targets: {json.dumps(targets)}\n")
        self.port = free_port()
        self.log = open(os.path.join(self.dir, "log"), "w")
        self.proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(self.dir, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)

        def ready():
            try:
                return http_get(f"http://127.0.0.1:{self.port}/-/ready", timeout=2)
            except OSError:
                return None
        wait_for(ready, timeout=60, what="Prometheus to be ready")

    def query(self, expr):
        url = (f"http://127.0.0.1:{self.port}/api/v1/query?"
               + urllib.parse.urlencode({"query": expr}))
        try:
            return json.loads(http_get(url))
        except urllib.error.HTTPError as e:
            return json.loads(e.read().decode())

    def rules(self):
        """The rule groups Prometheus loaded, as /api/v1/rules lists them."""
        return json.loads(http_get(f"http://127.0.0.1:{self.port}/api/v1/rules"))["data"]["groups"]

    def vector(self, expr, by):
        """{label value: number} for a vector query grouped by one label."""
        answer = self.query(expr)
        assert answer["status"] == "success", answer
        return {r["metric"].get(by, ""): float(r["value"][1]) for r in answer["data"]["result"]}

    def scalar(self, expr):
        """The value of a scalar, or of a vector of one element; None if empty."""
        answer = self.query(expr)
        assert answer["status"] == "success", answer
        if answer["data"]["resultType"] == "scalar":
            return float(answer["data"]["result"][1])
        values = self.vector(expr, "")
        return values.get("") if values else None

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def cli(*args, check=True):
    result = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=600)
    if check and result.returncode != 0:
        raise AssertionError(f"kmt {' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result
