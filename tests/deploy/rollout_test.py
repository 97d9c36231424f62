"""A model rolled out and back on two running replicas, as the Kubernetes
example does it: each replica serves its own model directory, which a sync
step fills from a model store (each version copied aside and renamed into
place, as deploy/k8s/deployment.yaml's model-sync sidecar does). While the
client streams batches over both replicas, version 2 is published, becomes
the default on both, and is removed again; no replica restarts and no
batch fails."""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from harness import CLI, SOURCE_DIR, Server, wait_for, write_points

BATCHES, BATCH_SIZE, D, K = 400, 1024, 32, 10


def sync(store, serving):
    """The sidecar's step: publish the store's versions, drop the gone ones."""
    for name in os.listdir(store):
        for version in os.listdir(os.path.join(store, name)):
            target = os.path.join(serving, name, version)
            if not os.path.exists(target):
                staging = os.path.join(serving, f".incoming-{name}-{version}")
                shutil.copytree(os.path.join(store, name, version), staging)
                os.makedirs(os.path.join(serving, name), exist_ok=True)
                os.rename(staging, target)
    for name in os.listdir(serving):
        if name.startswith(".") or not os.path.isdir(os.path.join(serving, name)):
            continue
        for version in os.listdir(os.path.join(serving, name)):
            if not os.path.exists(os.path.join(store, name, version)):
                shutil.rmtree(os.path.join(serving, name, version))


def default_version(server):
    match = re.search(r'^kmt_model_default_version\{model="rollout"\} (\S+)$', server.metrics(),
                      re.M)
    return float(match.group(1)) if match else None


class RolloutTest(unittest.TestCase):
    def test_a_model_rolls_out_and_back_on_running_replicas(self):
        work = tempfile.mkdtemp(prefix="kmt-rollout-")
        store = os.path.join(work, "store")
        os.makedirs(os.path.join(store, "rollout", "1"))
        shutil.copy(os.path.join(SOURCE_DIR, "models", "learned-onehot-d32-k10.kmt"),
                    os.path.join(store, "rollout", "1", "model.kmt"))
        dirs = [os.path.join(work, f"pod-{i}") for i in range(2)]
        for d in dirs:
            os.makedirs(d)
            sync(store, d)
        points = os.path.join(work, "points.csv")
        write_points(points, BATCHES * BATCH_SIZE, D, K, seed=5, digits=4)
        a, b = (Server(f"--model_dir={d}", "--model_poll_s=0.2", "--require_models=rollout")
                for d in dirs)
        pids = (a.proc.pid, b.proc.pid)
        try:
            self.assertEqual((default_version(a), default_version(b)), (1, 1))
            cli = subprocess.Popen(
                [CLI, "cluster", "--mode=per-batch", f"--server=ipv4:{a.address},{b.address}",
                 "--lb=round_robin", "--streams=2", "--model=rollout", f"--input={points}",
                 f"--batch_size={BATCH_SIZE}", f"--k={K}", "--iterations=20",
                 f"--labels_out={work}/labels"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            wait_for(lambda: a.batches() >= 3 and b.batches() >= 3, timeout=120,
                     what="both replicas to answer batches")

            # Out: version 2 published to the store, synced to each pod.
            os.makedirs(os.path.join(store, "rollout", "2"))
            shutil.copy(os.path.join(SOURCE_DIR, "models", "learned-onehot-d32-k10-kpp.kmt"),
                        os.path.join(store, "rollout", "2", "model.kmt"))
            for d in dirs:
                sync(store, d)
            wait_for(lambda: default_version(a) == 2 and default_version(b) == 2, timeout=60,
                     what="version 2 to be the default on both replicas")
            served = (a.batches(), b.batches())
            wait_for(lambda: a.batches() > served[0] + 2 and b.batches() > served[1] + 2,
                     timeout=120, what="batches answered by version 2")
            self.assertIsNone(cli.poll(), "the client finished before the rollback")

            # Back: version 2 removed from the store.
            shutil.rmtree(os.path.join(store, "rollout", "2"))
            for d in dirs:
                sync(store, d)
            wait_for(lambda: default_version(a) == 1 and default_version(b) == 1, timeout=60,
                     what="version 1 to be the default again")

            out, err = cli.communicate(timeout=600)
            self.assertEqual(cli.returncode, 0, err)
            self.assertIn(f"{BATCHES} batches, {BATCHES * BATCH_SIZE} points, 0 failed", out)
            self.assertEqual((a.proc.pid, b.proc.pid), pids)
            for server in (a, b):
                self.assertIsNone(server.proc.poll())
                self.assertRegex(server.metrics(), r"(?m)^kmt_model_loads_total 2$")
                self.assertRegex(server.metrics(),
                                 r'(?m)^kmt_model_load_failures_total\{reason="corrupt"\} 0$')
        finally:
            self.assertEqual(a.stop(), 0)
            self.assertEqual(b.stop(), 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
