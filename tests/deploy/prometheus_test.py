"""End to end with a real Prometheus: the server's metrics, scraped while
the kmt client drives good and bad batches, answer the queries operators and
the Grafana dashboard make; promtool accepts the exposition."""
import json
import math
import os
import re
import subprocess
import unittest

from harness import CLI, SOURCE_DIR, Prometheus, Server, http_get, wait_for

DASHBOARD = os.path.join(SOURCE_DIR, "deploy/grafana/dashboards/kmeans-transformer.json")

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
        cls.server = Server("--model_dir=")
        cls.prometheus = Prometheus([f"127.0.0.1:{cls.server.metrics_port}"])
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
            self.prometheus.vector('sum by (code) (kmt_errors_total{scope="batch"})', "code"),
            {"NOT_FOUND": 5, "INVALID_ARGUMENT": 7})
        # An unknown model name is not a label value of its own.
        self.assertEqual(
            self.prometheus.vector("sum by (model) (kmt_batches_total)", "model"),
            {"lloyd-onehot": 37, "lloyd-binary": 10, "unknown": 5})
        self.assertEqual(self.prometheus.scalar("sum(kmt_points_total)"), 40 * 512)

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

    def test_promtool_accepts_the_exposition_without_warnings(self):
        result = subprocess.run(["promtool", "check", "metrics"], input=self.server.metrics(),
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertEqual(result.stdout + result.stderr, "")

    def test_build_info_and_models_loaded(self):
        text = self.server.metrics()
        self.assertRegex(text, r'kmt_build_info\{version="[0-9.]+"\} 1')
        self.assertRegex(text, r'kmt_models_loaded\{kind="exact"\} 9')


if __name__ == "__main__":
    unittest.main(verbosity=2)
