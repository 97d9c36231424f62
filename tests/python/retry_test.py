"""The Python client's retries against real kmt-server replicas, as the C++
client's: a replica killed or drained in the middle of a stream of batches
loses nothing and changes nothing, and a target where nothing listens fails
after max_attempts with UNAVAILABLE, a ConnectionError that names it."""
import os
import signal
import socket
import sys
import time
import unittest

import numpy as np

SOURCE_DIR = os.environ["KMT_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests/deploy"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))

import kmt  # noqa: E402
from harness import Server  # noqa: E402

POINTS = np.random.default_rng(5).normal(size=(120 * 1024, 8)).astype(np.float32)


def python_only(client, python=True):
    """`client`, streaming through gRPC's Python API if `python`, as where
    the package lacks the compiled extension."""
    if python:
        client._compiled_client = lambda: (None, None)
    return client


def run(target, stop=None, each=False):
    """Every batch of POINTS clustered through `target` by cluster_batches
    (gRPC's Python API), or by cluster_each (the compiled client) if
    `each`; `stop()` is called once 20 answers are in. (labels, centers,
    batches resent)."""
    labels, centers = [], []

    def keep(r):
        if len(labels) == 20 and stop:
            stop()
        labels.append(r.labels)
        centers.append(r.centers)
    # One stream for every batch, unless a failure ends it.
    with python_only(kmt.Client(target, timeout=120, batches_per_stream=1000), not each) as client:
        if each:
            requests = (client.wire_request(block, 6, iterations=60, seed=3)
                        for block in kmt.batches(POINTS, 1024))
            client.cluster_each(requests, lambda r: keep(client.result(r, 8, 6)))
        else:
            for r in client.cluster_batches(kmt.batches(POINTS, 1024), k=6, iterations=60,
                                            seed=3):
                keep(r)
        return np.concatenate(labels), np.concatenate(centers), client.resent


class RetryTest(unittest.TestCase):
    def check(self, signal_number, each=False):
        a = Server("--model_dir=", "--workers=1")
        b = Server("--model_dir=", "--workers=1")
        try:
            both = f"ipv4:{a.address},{b.address}"
            calm_labels, calm_centers, calm_resent = run(both, each=each)
            before = {server: server.batches() for server in (a, b)}
            victim = []

            def stop():
                # The replica the stream is on: its count has grown.
                victim.append(next(s for s in (a, b) if s.batches() > before[s]))
                victim[0].proc.send_signal(signal_number)
            labels, centers, resent = run(both, stop, each)
            self.assertEqual(calm_resent, 0)
            self.assertGreater(resent, 0)  # the victim held batches when it went
            self.assertEqual(len(labels), len(POINTS))
            np.testing.assert_array_equal(labels, calm_labels)
            np.testing.assert_array_equal(centers, calm_centers)
            victim[0].proc.wait(timeout=60)
        finally:
            a.stop()
            b.stop()

    def test_a_replica_killed_mid_stream_loses_nothing(self):
        self.check(signal.SIGKILL)

    @unittest.skipUnless(os.environ.get("KMT_EXTENSION_DIR"), "a build without kmt._driver")
    def test_a_replica_killed_mid_compiled_stream_loses_nothing(self):
        self.check(signal.SIGKILL, each=True)

    def test_a_replica_drained_mid_stream_loses_nothing(self):
        # SIGTERM: the replica answers what it accepted and refuses the rest
        # with UNAVAILABLE, which the client sends to the other one.
        self.check(signal.SIGTERM)

    def test_a_batch_refused_for_the_budget_is_sent_again_after_the_pushback(self):
        # The first batch holds most of the budget while the one worker runs
        # it; the second, read meanwhile, does not fit and is refused with a
        # pushback, which the client waits out before sending it again.
        held = POINTS[:100000]  # 3.2 MB of float32
        over = POINTS[:50000]  # 1.6 MB: the two pass the 4 MiB budget
        server = Server("--model_dir=", "--workers=1", f"--max_held_bytes={4 << 20}")
        try:
            # Through gRPC's Python API, then the compiled client if the
            # build has it.
            for refused, python in enumerate((True, False) if os.environ.get("KMT_EXTENSION_DIR")
                                             else (True,)):
                with self.subTest(python=python):
                    with python_only(kmt.Client(server.address, timeout=120), python) as client:
                        answers = list(client.stream([client.request(held, 16, iterations=300),
                                                      client.request(over, 4, iterations=5)]))
                        self.assertEqual(client.resent, 1)
                    self.assertEqual([a.HasField("error") for a in answers], [False, False])
                    self.assertEqual([len(a.centers_f32) for a in answers],
                                     [16 * 8 * 4, 4 * 8 * 4])
                    self.assertIn(f'kmt_refused_total{{reason="held_bytes"}} {2 * refused + 1}',
                                  server.metrics())
                    # Past max_pushbacks, the refusal is the answer.
                    with python_only(kmt.Client(server.address, timeout=120, max_pushbacks=0),
                                     python) as client:
                        with self.assertRaises(kmt.ServiceError) as caught:
                            list(client.stream([client.request(held, 16, iterations=300),
                                                client.request(over, 4, iterations=5)]))
                    self.assertEqual(caught.exception.code.name, "RESOURCE_EXHAUSTED")
                    self.assertIn("would pass its budget of 4.0 MiB (--max_held_bytes)",
                                  caught.exception.message)
        finally:
            server.stop()

    def test_gives_up_on_an_address_where_nothing_listens(self):
        with socket.socket() as s:  # a port that was free a moment ago
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        target = f"127.0.0.1:{port}"
        start = time.monotonic()
        with kmt.Client(target, timeout=30, max_attempts=3) as client:
            with self.assertRaises(kmt.ServiceError) as caught:
                list(client.cluster_batches([POINTS[:100]] * 3, k=3))
            self.assertLess(time.monotonic() - start, 10)  # backed off, not stuck
            # An unreachable server is a ConnectionError as well, named.
            self.assertIsInstance(caught.exception, ConnectionError)
            self.assertIsInstance(caught.exception, kmt.ServiceUnavailable)
            self.assertIn(f"kmt-server at {target}", caught.exception.message)
            with self.assertRaises(ConnectionError) as models:
                client.models()
            self.assertIsInstance(models.exception, kmt.ServiceError)
            self.assertEqual(models.exception.code.name, "UNAVAILABLE")
            self.assertIn(f"kmt-server at {target}", str(models.exception))
        self.assertEqual(caught.exception.code.name, "UNAVAILABLE")
        # Whether a batch was written before a stream failed decides which
        # count ran out first, the batch's or the streams'.
        message = caught.exception.message
        self.assertTrue("unanswered after 3 attempts" in message
                        or "3 streams in a row failed" in message, message)
        # The compiled client's stream gives up as well, as a ConnectionError.
        start = time.monotonic()
        with kmt.Client(target, timeout=30, max_attempts=3) as client:
            with self.assertRaises(ConnectionError) as caught:
                client.cluster_each([client.wire_request(POINTS[:100], 3)] * 3,
                                    lambda r: None)
            self.assertLess(time.monotonic() - start, 10)
            self.assertEqual(caught.exception.code.name, "UNAVAILABLE")
            self.assertIn(f"kmt-server at {target}", caught.exception.message)


if __name__ == "__main__":
    unittest.main(verbosity=2)
