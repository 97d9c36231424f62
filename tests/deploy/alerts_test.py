"""The alerting and recording rules: promtool accepts them, its unit tests
(alerts_test.yml) make every alert fire on the input series meant to fire it
and stay silent on the healthy ones, both Prometheus configurations load the
rules, and the Kubernetes relabeling scrapes the metrics port of IPv4 and
IPv6 pods alike."""
import glob
import json
import os
import subprocess
import tempfile
import unittest

import yaml

from harness import SOURCE_DIR

ALERTS = os.path.join(SOURCE_DIR, "deploy/prometheus/alerts.yml")
ALERT_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "alerts_test.yml")


def promtool(*args):
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def alert_rules():
    return {r["alert"]: r for g in load(ALERTS)["groups"] for r in g["rules"] if "alert" in r}


class AlertsTest(unittest.TestCase):
    def test_promtool_checks_the_rules(self):
        result = promtool("check", "rules", ALERTS)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_promtool_unit_tests_pass(self):
        result = promtool("test", "rules", ALERT_TESTS)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_every_alert_is_tested_firing_and_silent(self):
        fires, silent = set(), set()
        for case in load(ALERT_TESTS)["tests"]:
            for check in case.get("alert_rule_test", []):
                (fires if check["exp_alerts"] else silent).add(check["alertname"])
        self.assertEqual(fires, set(alert_rules()))
        self.assertEqual(silent, set(alert_rules()))

    def test_the_alerts_operators_page_on(self):
        self.assertEqual(set(alert_rules()), {
            "KmtServerErrors", "KmtLatencyP99High", "KmtTargetDown", "KmtLearnedModelsMissing",
            "KmtNoTraffic", "KmtObjectiveDrift", "KmtModelLoadFailed", "KmtOverloaded"})

    def test_expected_learned_models_are_the_shipped_files(self):
        shipped = len(glob.glob(os.path.join(SOURCE_DIR, "models/*.kmt")))
        self.assertEqual(alert_rules()["KmtLearnedModelsMissing"]["expr"],
                         f'kmt_models_loaded{{kind="learned"}} < {shipped}')

    def test_compose_prometheus_loads_the_rules(self):
        deploy = os.path.join(SOURCE_DIR, "deploy")
        config = load(os.path.join(deploy, "prometheus/prometheus.yml"))
        self.assertEqual(config["rule_files"], ["alerts.yml"])
        result = promtool("check", "config", os.path.join(deploy, "prometheus/prometheus.yml"))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("SUCCESS: 13 rules found", result.stdout)
        compose = load(os.path.join(deploy, "compose.yaml"))["services"]["prometheus"]
        self.assertIn("./prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro",
                      compose["volumes"])


class KubernetesScrapeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        docs = load(os.path.join(SOURCE_DIR, "deploy/k8s/prometheus-scrape.yaml"))
        cls.config = yaml.safe_load(docs["data"]["scrape.yaml"])

    def test_loads_the_rules(self):
        self.assertEqual([os.path.basename(f) for f in self.config["rule_files"]], ["alerts.yml"])

    def test_relabeling_scrapes_the_annotated_port_on_ipv4_and_ipv6(self):
        """The job's relabeling on static targets carrying the labels pod
        discovery sets: pod discovery's __address__ is the pod IP and a
        container port (the gRPC one here). The pod addresses are labels
        only: promtool's service-discovery check relabels them and contacts
        none (the test runs on loopback alone)."""
        job = self.config["scrape_configs"][0]
        pods = [("ipv4", "10.1.2.3", "10.1.2.3:50051", "true"),
                ("ipv6", "fd00:10:244::5", "[fd00:10:244::5]:50051", "true"),
                ("not-annotated", "10.1.2.4", "10.1.2.4:50051", None)]
        static = []
        for name, ip, address, scrape in pods:
            labels = {"__meta_kubernetes_pod_name": name, "__meta_kubernetes_pod_ip": ip,
                      "__meta_kubernetes_pod_annotation_prometheus_io_port": "9464",
                      "__meta_kubernetes_pod_annotation_prometheus_io_path": "/metrics"}
            if scrape:
                labels["__meta_kubernetes_pod_annotation_prometheus_io_scrape"] = scrape
            static.append({"targets": [address], "labels": labels})
        config = {"scrape_configs": [{"job_name": job["job_name"], "static_configs": static,
                                      "relabel_configs": job["relabel_configs"]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
            yaml.safe_dump(config, f)
        result = promtool("check", "service-discovery", "--timeout=5s", f.name, job["job_name"])
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        targets = {t["labels"]["pod"]: t["labels"] for t in json.loads(result.stdout)
                   if t["labels"]}
        self.assertEqual({pod: labels["__address__"] for pod, labels in targets.items()},
                         {"ipv4": "10.1.2.3:9464", "ipv6": "[fd00:10:244::5]:9464"})
        for labels in targets.values():
            self.assertEqual(labels["__metrics_path__"], "/metrics")


if __name__ == "__main__":
    unittest.main(verbosity=2)
