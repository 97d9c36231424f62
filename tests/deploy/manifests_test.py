"""The deployment files agree with each other and with the server: the
manifests parse, name the same image and ports as the Dockerfile and the
compose file, probe grpc.health.v1 on the gRPC port, and pass only flags the
server has; the server starts from the ConfigMap's flag file."""
import os
import re
import subprocess
import tempfile
import unittest

import yaml

from harness import SERVER, SOURCE_DIR, read, wait_for

DEPLOY = os.path.join(SOURCE_DIR, "deploy")
IMAGE = "kmeans-transformer:0.1.0"


def load_all(path):
    with open(path) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def k8s():
    docs = {}
    for name in sorted(os.listdir(os.path.join(DEPLOY, "k8s"))):
        for doc in load_all(os.path.join(DEPLOY, "k8s", name)):
            docs[(doc["kind"], doc["metadata"]["name"])] = doc
    return docs


def flag_port(flags, name):
    return int(re.search(rf"^--{name}=.*:(\d+)$", flags, re.M).group(1))


class ManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = k8s()
        cls.deployment = cls.docs[("Deployment", "kmeans-transformer")]
        cls.pod = cls.deployment["spec"]["template"]
        cls.container = cls.pod["spec"]["containers"][0]
        cls.ports = {p["name"]: p["containerPort"] for p in cls.container["ports"]}
        cls.flags = cls.docs[("ConfigMap", "kmeans-transformer-flags")]["data"]["flags"]
        cls.dockerfile = read(os.path.join(SOURCE_DIR, "Dockerfile"))
        cls.server_flags = set(re.findall(
            r"--([a-z_]+)", subprocess.run([SERVER, "--helpfull"], capture_output=True,
                                           text=True).stdout))

    def test_every_kind_is_there(self):
        kinds = {kind for kind, _ in self.docs}
        self.assertTrue({"Deployment", "Service", "HorizontalPodAutoscaler",
                         "PodDisruptionBudget", "ConfigMap"} <= kinds, kinds)

    def test_image_and_ports_match_the_dockerfile_and_compose(self):
        self.assertEqual(self.container["image"], IMAGE)
        self.assertIn(f"docker build -t {IMAGE}", self.dockerfile)
        exposed = set(map(int, re.search(r"^EXPOSE (.*)$", self.dockerfile, re.M).group(1).split()))
        self.assertEqual(set(self.ports.values()), exposed)
        compose = load_all(os.path.join(DEPLOY, "compose.yaml"))[0]["services"]
        self.assertEqual(compose["server"]["image"], IMAGE)
        self.assertEqual({int(p.split(":")[1]) for p in compose["server"]["ports"]}, exposed)

    def test_image_build_leaves_local_builds_out_and_installs_build_packages_only(self):
        ignored = read(os.path.join(SOURCE_DIR, ".dockerignore")).split()
        for path in ("build/", "build-*/", ".git/"):
            self.assertIn(path, ignored)
        build_stage = self.dockerfile.split("\nFROM ")[1]
        self.assertIn("scripts/install-deps.sh --build", build_stage)
        self.assertNotIn("scripts/build.sh", build_stage)  # which installs the test packages
        listed = subprocess.run(
            ["bash", "-c", 'source <(sed -n "/^build_packages=/,/^)/p" "$0"); '
             'echo "${build_packages[@]}"', os.path.join(SOURCE_DIR, "scripts/install-deps.sh")],
            capture_output=True, text=True, check=True).stdout.split()
        self.assertIn("libgrpc++-dev", listed)
        for package in ("prometheus", "libfaiss-dev", "python3", "libgtest-dev", "clang-format"):
            self.assertNotIn(package, listed)

    def test_flags_exist_and_name_the_container_ports(self):
        names = re.findall(r"^--([a-z_]+)=", self.flags, re.M)
        self.assertTrue(names)
        for name in names:
            self.assertIn(name, self.server_flags)
        self.assertEqual(flag_port(self.flags, "listen"), self.ports["grpc"])
        self.assertEqual(flag_port(self.flags, "metrics_listen"), self.ports["metrics"])
        entrypoint = re.search(r"^ENTRYPOINT (.*)$", self.dockerfile, re.M).group(1)
        for name in re.findall(r"--([a-z_]+)=", entrypoint):
            self.assertIn(name, self.server_flags)
        self.assertIn("--model_dir=/models", entrypoint)
        self.assertIn("--model_dir=/models", self.flags)
        self.assertIn("COPY models/ /models/", self.dockerfile)

    def test_the_flag_file_is_mounted_where_the_args_say(self):
        self.assertEqual(self.container["args"], ["--flagfile=/etc/kmt/flags"])
        mount = self.container["volumeMounts"][0]
        self.assertEqual(mount["mountPath"], "/etc/kmt")
        volume = next(v for v in self.pod["spec"]["volumes"] if v["name"] == mount["name"])
        self.assertEqual(volume["configMap"]["name"], "kmeans-transformer-flags")

    def test_probes_use_grpc_health_on_the_grpc_port(self):
        for probe in ("readinessProbe", "livenessProbe"):
            self.assertEqual(self.container[probe]["grpc"]["port"], self.ports["grpc"])
        proto = read(os.path.join(SOURCE_DIR, "proto/kmeans_transformer.proto"))
        service = (re.search(r"^package ([\w.]+);", proto, re.M).group(1) + "." +
                   re.search(r"^service (\w+)", proto, re.M).group(1))
        self.assertEqual(self.container["readinessProbe"]["grpc"]["service"], service)

    def test_termination_grace_covers_the_drain(self):
        seconds = lambda name: int(re.search(rf"^--{name}=(\d+)s$", self.flags, re.M).group(1))
        self.assertGreaterEqual(self.pod["spec"]["terminationGracePeriodSeconds"],
                                seconds("not_serving_delay") + seconds("shutdown_grace"))

    def test_services_hpa_pdb_and_scrape_config_point_at_the_pods(self):
        labels = self.pod["metadata"]["labels"]
        for name in ("kmeans-transformer", "kmeans-transformer-headless"):
            service = self.docs[("Service", name)]["spec"]
            self.assertEqual(service["selector"], labels)
            for port in service["ports"]:
                self.assertEqual(port["port"], self.ports[port["targetPort"]])
        self.assertIsNone(self.docs[("Service", "kmeans-transformer")]["spec"].get("clusterIP"))
        self.assertEqual(self.docs[("Service", "kmeans-transformer-headless")]["spec"]["clusterIP"],
                         "None")
        target = self.docs[("HorizontalPodAutoscaler", "kmeans-transformer")]["spec"]["scaleTargetRef"]
        self.assertEqual((target["kind"], target["name"]), ("Deployment", "kmeans-transformer"))
        pdb = self.docs[("PodDisruptionBudget", "kmeans-transformer")]["spec"]
        self.assertEqual(pdb["selector"]["matchLabels"], labels)
        annotations = self.pod["metadata"]["annotations"]
        self.assertEqual(int(annotations["prometheus.io/port"]), self.ports["metrics"])
        prometheus = load_all(os.path.join(DEPLOY, "prometheus/prometheus.yml"))[0]
        target = prometheus["scrape_configs"][0]["static_configs"][0]["targets"][0]
        self.assertEqual(int(target.split(":")[1]), self.ports["metrics"])

    def test_the_server_starts_from_the_config_map_flags(self):
        work = tempfile.mkdtemp(prefix="kmt-flagfile-")
        flagfile = os.path.join(work, "flags")
        with open(flagfile, "w") as f:
            f.write(self.flags)
        port_file = os.path.join(work, "port")
        # The cluster's addresses and paths, overridden for a loopback run.
        proc = subprocess.Popen(
            [SERVER, f"--flagfile={flagfile}", "--listen=127.0.0.1:0",
             "--metrics_listen=127.0.0.1:0", f"--model_dir={SOURCE_DIR}/models",
             f"--port_file={port_file}", "--not_serving_delay=0s"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: os.path.exists(port_file) or proc.poll() is not None,
                     what="the server to start")
            started = proc.poll() is None
        finally:
            proc.terminate()
            _, err = proc.communicate(timeout=60)
        self.assertTrue(started, err)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn("with 2 workers", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
