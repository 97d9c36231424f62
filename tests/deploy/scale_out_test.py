"""Scale-out as Kubernetes does it, on loopback: two replicas, the client
given both addresses with round-robin balancing (what a headless Service
gives through dns:///). Batches spread over both; one replica is killed
mid-stream and the client re-sends its unanswered batches to the other;
every batch is answered exactly once."""
import collections
import os
import subprocess
import tempfile
import unittest

from harness import CLI, Server, wait_for, write_points

BATCHES, BATCH_SIZE, D, K = 120, 2048, 16, 8


class ScaleOutTest(unittest.TestCase):
    def test_batches_spread_and_survive_a_replica_kill(self):
        work = tempfile.mkdtemp(prefix="kmt-scale-out-")
        points = os.path.join(work, "points.csv")
        write_points(points, BATCHES * BATCH_SIZE, D, K, seed=3)
        a, b = Server("--model_dir="), Server("--model_dir=")
        try:
            cli = subprocess.Popen(
                [CLI, "cluster", "--mode=per-batch", f"--server=ipv4:{a.address},{b.address}",
                 "--lb=round_robin",
                 "--streams=4", "--window=2", "--batches_per_stream=8", "--max_attempts=5", f"--input={points}",
                 f"--batch_size={BATCH_SIZE}", f"--k={K}", "--iterations=150",
                 f"--labels_out={work}/labels", f"--centers_out={work}/centers.csv"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # Both replicas take a share (their own metrics say so) ...
            shares = wait_for(lambda: (a.batches(), b.batches())
                              if a.batches() >= 3 and b.batches() >= 3 else None,
                              timeout=120, what="both replicas to answer batches")
            # ... then one dies while the client is still streaming.
            self.assertIsNone(cli.poll(), "the client finished before the kill")
            a.kill()
            out, err = cli.communicate(timeout=600)
            self.assertEqual(cli.returncode, 0, err)
            self.assertIn(f"{BATCHES} batches, {BATCHES * BATCH_SIZE} points, 0 failed", out)
            self.assertGreater(b.batches(), shares[1])
            print(f"before the kill: replica A {shares[0]:.0f} batches, B {shares[1]:.0f}; "
                  f"after: B {b.batches():.0f}")
        finally:
            if a.proc.poll() is None:
                a.kill()
            self.assertEqual(b.stop(), 0)
        # Exactly one answer per batch in the output: K center rows each,
        # one label per point.
        rows = collections.Counter()
        with open(f"{work}/centers.csv") as f:
            next(f)
            for line in f:
                rows[int(line.split(",", 1)[0])] += 1
        self.assertEqual(rows, {batch: K for batch in range(BATCHES)})
        with open(f"{work}/labels") as f:
            self.assertEqual(sum(1 for _ in f), BATCHES * BATCH_SIZE)


if __name__ == "__main__":
    unittest.main(verbosity=2)
