"""End to end with a real Prometheus: the server's metrics, scraped while
the kmt client drives good and bad batches, equal the traffic sent and
answer the queries operators, the Grafana dashboard and the alerting rules
make; promtool accepts the exposition."""
import json
import math
import os
import re
import subprocess
import sys
import unittest

import numpy as np

from harness import CLI, SOURCE_DIR, Prometheus, Server, http_get, wait_for

sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))
import kmt  # noqa: E402

DASHBOARD = os.path.join(SOURCE_DIR, "deploy/grafana/dashboards/kmeans-transformer.json")
ALERTS = os.path.join(SOURCE_DIR, "deploy/prometheus/alerts.yml")

# (model, extra flags, batches, expected code)
TRAFFIC = [
    ("lloyd-onehot", [], 30, "OK"),
    ("lloyd-binary", [], 10, "OK"),
    ("no-such-model", [], 5, "NOT_FOUND"),
    ("lloyd-onehot", ["--k=600"], 7, "INVALID_ARGUMENT"),  # k > n = 512
]


class PrometheusTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(f"--model_dir={SOURCE_DIR}/models")
        cls.prometheus = Prometheus([f"127.0.0.1:{cls.server.metrics_port}"], rules=[ALERTS])
        # What the first scrape saw, before any traffic.
        wait_for(lambda: cls.prometheus.scalar("count(kmt_errors_total)"),
                 what="the first scrape")
        cls.at_start = {
            "errors": cls.prometheus.vector("kmt_errors_total", "code"),
            "ok": cls.prometheus.vector('kmt_batches_total{code="OK"}', "model"),
            "learned": cls.prometheus.scalar('kmt_models_loaded{kind="learned"}'),
        }
        # Two rounds with scrapes in between, so that rates over the
        # scraped samples are not zero.
        sent = 0
        for round_ in (0, 1):
            for model, flags, count, code in TRAFFIC:
                part = count // 2 if round_ == 0 else count - count // 2
                result = subprocess.run(
                    [CLI, "bench", f"--server={cls.server.address}", f"--model={model}",
                     f"--count={part}", "--concurrency=2", "--n=512", "--d=8", "--k=4",
                     "--iterations=5", *flags],
                    capture_output=True, text=True, timeout=120, check=True)
                assert f"status {code} {part}" in result.stdout, result.stdout
                sent += part
            wait_for(lambda: cls.prometheus.scalar("sum(kmt_batches_total)") == sent,
                     what=f"Prometheus to scrape {sent} batches")
        # A few more samples of the final values.
        scrapes = cls.prometheus.scalar("count_over_time(up[1m])")
        wait_for(lambda: cls.prometheus.scalar("count_over_time(up[1m])") >= scrapes + 2,
                 what="two more scrapes")

    @classmethod
    def tearDownClass(cls):
        cls.prometheus.stop()
        assert cls.server.stop() == 0

    def test_batch_counters_equal_what_was_sent_per_code(self):
        want = {}
        for _, _, count, code in TRAFFIC:
            want[code] = want.get(code, 0) + count
        self.assertEqual(self.prometheus.vector("sum by (code) (kmt_batches_total)", "code"), want)
        self.assertEqual(
            self.prometheus.vector("sum by (code) (kmt_errors_total) > 0", "code"),
            {"NOT_FOUND": 5, "INVALID_ARGUMENT": 7})
        # An unknown model name is not a label value of its own.
        self.assertEqual(
            self.prometheus.vector("sum by (model) (kmt_batches_total) > 0", "model"),
            {"lloyd-onehot": 37, "lloyd-binary": 10, "unknown": 5})
        self.assertEqual(self.prometheus.scalar("sum(kmt_points_total)"), 40 * 512)
        # Streams have their own counter: none ended in error, so no batch
        # or stream outcome is counted twice.
        self.assertEqual(self.prometheus.scalar('sum(kmt_streams_total{code!="OK"})'), 0)
        self.assertGreaterEqual(self.prometheus.scalar('sum(kmt_streams_total{code="OK"})'), 8)

    def test_series_alerts_watch_exist_at_zero_before_traffic(self):
        # Every canonical error code, and OK for every served model.
        self.assertEqual(len(self.at_start["errors"]), 16)
        self.assertEqual(set(self.at_start["errors"].values()), {0})
        self.assertEqual(len(self.at_start["ok"]), 15)  # nine exact, six learned
        self.assertEqual(set(self.at_start["ok"].values()), {0})
        self.assertEqual(self.at_start["learned"], 6)
        # So the first errors after a start show in increase(), from the
        # series' first sample at 0.
        code = 'kmt_errors_total{code="INVALID_ARGUMENT"}'
        self.assertEqual(self.prometheus.scalar(
            f"max_over_time({code}[10m]) - min_over_time({code}[10m])"), 7)
        self.assertGreater(self.prometheus.scalar(f"increase({code}[10m])"), 0)

    def test_queue_and_compute_histograms_count_successful_batches(self):
        for name in ("kmt_queue_seconds", "kmt_compute_seconds"):
            with self.subTest(name=name):
                self.assertEqual(
                    self.prometheus.vector(f"sum by (model) ({name}_count)", "model"),
                    {"lloyd-onehot": 30, "lloyd-binary": 10})
                self.assertGreater(self.prometheus.scalar(f"sum({name}_sum)"), 0)
        # The parts of a batch's time do not exceed the whole.
        self.assertLessEqual(
            self.prometheus.scalar("sum(kmt_queue_seconds_sum) + sum(kmt_compute_seconds_sum)"),
            self.prometheus.scalar('sum(kmt_request_duration_seconds_sum{code="OK"})'))

    def test_process_metrics(self):
        query = self.prometheus.scalar
        self.assertGreater(query("process_resident_memory_bytes"), 1 << 20)
        self.assertGreater(query("process_cpu_seconds_total"), 0)
        self.assertGreater(query("process_open_fds"), 2)
        self.assertGreater(query("process_max_fds"), query("process_open_fds"))
        self.assertGreater(query("process_threads"), 2)
        self.assertLessEqual(query("process_start_time_seconds"), query("time()"))

    def test_latency_histogram_counts_every_batch_and_answers_quantiles(self):
        self.assertEqual(self.prometheus.scalar("sum(kmt_request_duration_seconds_count)"), 52)
        p99 = self.prometheus.scalar(
            "histogram_quantile(0.99, sum by (le) (rate(kmt_request_duration_seconds_bucket[1m])))")
        self.assertIsNotNone(p99)
        self.assertTrue(math.isfinite(p99) and p99 > 0, p99)

    def test_objective_histogram_is_populated_per_model(self):
        self.assertEqual(
            self.prometheus.vector("sum by (model) (kmt_objective_per_point_count)", "model"),
            {"lloyd-onehot": 30, "lloyd-binary": 10})
        self.assertGreater(self.prometheus.scalar("sum(kmt_objective_per_point_sum)"), 0)
        self.assertEqual(self.prometheus.scalar("sum(kmt_layers_sum)"), 40 * 5)

    def test_rules_load_and_every_rule_expression_evaluates(self):
        groups = self.prometheus.rules()
        rules = [r for g in groups for r in g["rules"]]
        self.assertEqual(len(rules), 13)
        for rule in rules:
            with self.subTest(rule=rule["name"]):
                self.assertEqual(rule["health"], "ok", rule)
                answer = self.prometheus.query(rule["query"])
                self.assertEqual(answer["status"], "success", answer)
        # The service level indicators have values; nothing fires.
        self.assertEqual(self.prometheus.scalar("kmt:batch_error_ratio:rate5m"), 0)
        self.assertEqual(self.prometheus.scalar("sum(kmt:refused_ratio:rate5m)"), 0)
        self.assertEqual(set(self.prometheus.vector("kmt:points:rate5m > 0", "model")),
                         {"lloyd-onehot", "lloyd-binary"})
        self.assertEqual(
            set(self.prometheus.vector("kmt:request_duration_seconds:p99_5m > 0", "model")),
            {"lloyd-onehot", "lloyd-binary"})
        self.assertEqual(
            set(self.prometheus.vector("kmt:objective_per_point:mean5m > 0", "model")),
            {"lloyd-onehot", "lloyd-binary"})
        self.assertEqual(self.prometheus.vector('ALERTS{alertstate="firing"}', "alertname"), {})

    def test_every_dashboard_expression_evaluates(self):
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
        self.assertGreaterEqual(len(exprs), 10)
        for expr in exprs:
            with self.subTest(expr=expr):
                # Grafana fills $__rate_interval in; any window over the scrape interval works.
                answer = self.prometheus.query(expr.replace("$__rate_interval", "1m"))
                self.assertEqual(answer["status"], "success", answer)
                self.assertTrue(answer["data"]["result"], f"no data for {expr}")

    def test_dashboard_latency_is_of_answered_batches_and_heatmap_is_a_heatmap(self):
        with open(DASHBOARD) as f:
            panels = json.load(f)["panels"]
        for panel in panels:
            for target in panel.get("targets", []):
                if "kmt_request_duration_seconds_bucket" in target["expr"]:
                    self.assertIn('kmt_request_duration_seconds_bucket{code="OK"}', target["expr"])
                if panel["type"] == "heatmap":
                    self.assertEqual(target.get("format"), "heatmap")
        exprs = " ".join(t["expr"] for p in panels for t in p.get("targets", []))
        for name in ("kmt_queue_seconds_bucket", "kmt_compute_seconds_bucket",
                     "process_resident_memory_bytes", "process_cpu_seconds_total",
                     "kmt_objective_per_point_sum"):
            self.assertIn(name, exprs)

    def test_promtool_accepts_the_exposition_without_warnings(self):
        result = subprocess.run(["promtool", "check", "metrics"], input=self.server.metrics(),
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout + result.stderr, "")

    def test_build_info_and_models_loaded(self):
        text = self.server.metrics()
        self.assertRegex(text, r'kmt_build_info\{simd="[a-z0-9-, ]+",version="[0-9.]+"\} 1')
        self.assertRegex(text, r'kmt_models_loaded\{kind="exact"\} 9')


class ObjectiveQuantilesTest(unittest.TestCase):
    """The dashboard's objective-per-point quantiles, read by Prometheus
    from the histogram, against the true quantiles of the batches sent."""

    def test_quantiles_within_ten_percent(self):
        server = Server("--model_dir=")
        prometheus = Prometheus([f"127.0.0.1:{server.metrics_port}"])
        try:
            # 200 batches whose spread, and so objective per point, ranges
            # over two decades.
            rng = np.random.default_rng(11)

            def blocks():
                for _ in range(200):
                    centers = rng.uniform(0, 10, size=(4, 3))
                    spread = 10 ** rng.uniform(-1.5, 0.5)
                    yield (centers[rng.integers(0, 4, 256)]
                           + rng.normal(0, spread, (256, 3))).astype(np.float32)
            with kmt.Client(server.address) as client:
                per_point = np.array([r.objective / len(r.labels) for r in
                                      client.cluster_batches(blocks(), k=4, iterations=5)])
            wait_for(lambda: prometheus.scalar("sum(kmt_objective_per_point_count)") == 200,
                     what="Prometheus to scrape 200 batches")
            for q in (0.5, 0.9):
                with self.subTest(q=q):
                    true = np.quantile(per_point, q, method="inverted_cdf")
                    read = prometheus.scalar(
                        f"histogram_quantile({q}, sum by (le) (kmt_objective_per_point_bucket))")
                    self.assertLess(abs(read / true - 1), 0.1, (read, true))
        finally:
            prometheus.stop()
            server.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
