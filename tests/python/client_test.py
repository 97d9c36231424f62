"""The Python client (python/kmt) against a real kmt-server: numpy arrays in
and out, raw payloads equal to repeated fields, errors as exceptions,
batches streamed in order, Lloyd's over a whole dataset equal to Lloyd's on
all points at once, deadlines, stubs generated at import from any working
directory without a trace, scikit-learn's init names, errors that say what to
do (a URL for a server, a request larger than a message), KMT_SERVER, and
the docs' example. (install_test.py installs the package.)"""
import inspect
import itertools
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

SOURCE_DIR = os.environ["KMT_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests/deploy"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))

import kmt  # noqa: E402
from harness import Server  # noqa: E402


def blobs(n, d, k, seed=3, spread=0.05):
    """n points around k well separated centers in [0, 10]^d."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(0, 10, size=(k, d))
    return (centers[rng.integers(0, k, size=n)] + rng.normal(0, spread, size=(n, d))).astype(
        np.float32)


def lloyd(points, centers, iterations):
    """Reference Lloyd's on all points at once, in double."""
    x = points.astype(np.float64)
    c = centers.astype(np.float64)
    for _ in range(iterations):
        labels = ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1).argmin(1)
        for j in range(len(c)):
            if (labels == j).any():
                c[j] = x[labels == j].mean(0)
    return c


def run_python(code, cwd, **env):
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                            text=True, timeout=120, env={**os.environ, **env})
    if result.returncode != 0:
        raise AssertionError(result.stderr)
    return result.stdout


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server(f"--model_dir={SOURCE_DIR}/models")
        cls.client = kmt.Client(cls.server.address, timeout=120)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        assert cls.server.stop() == 0

    def test_models(self):
        infos = {m.name: m for m in self.client.models()}
        models = {name: m.kind for name, m in infos.items()}
        self.assertEqual(models["lloyd-onehot"], "exact")
        self.assertEqual(sorted(kind for kind in models.values()).count("learned"), 6)
        # Learned steps, then Lloyd's: the shipped -kpp layer for 10 steps.
        self.assertEqual(infos["learned-onehot-d32-k10-kpp-lloyd"].lloyd_after, 10)
        self.assertEqual(infos["learned-onehot-d32-k10-kpp"].lloyd_after, 0)

    def test_cluster_takes_and_returns_numpy_arrays(self):
        points = blobs(1000, 3, 4)
        result = self.client.cluster(points, k=4, iterations=10)
        self.assertEqual(result.labels.shape, (1000,))
        self.assertEqual(result.labels.dtype, np.int32)
        self.assertEqual(result.centers.shape, (4, 3))
        self.assertEqual(result.centers.dtype, np.float32)
        # Each label is the point's nearest final center, and the objective
        # is the sum of squared distances to them.
        distances = ((points[:, None, :].astype(np.float64) - result.centers[None]) ** 2).sum(-1)
        np.testing.assert_array_equal(result.labels, distances.argmin(1))
        self.assertAlmostEqual(result.objective, distances.min(1).sum(),
                               delta=1e-4 * result.objective)
        self.assertEqual(result.iterations_run, 10)
        self.assertEqual(result.model_version, 1)  # the exact models' one version

    def test_trajectory_and_variant_parameters_pass_through(self):
        points = blobs(500, 2, 3)
        result = self.client.cluster(points, k=3, iterations=5, model="kmedoids",
                                     parameters={"gamma": 2.0}, return_trajectory=True)
        self.assertEqual(result.model, "kmedoids")
        self.assertEqual(result.layer_objectives.shape, (5,))
        request = self.client.request(points, 3, model="soft-kmeans", parameters={"beta": 4.0})
        self.assertEqual(dict(request.parameters), {"beta": 4.0})
        with self.assertRaises(TypeError) as caught:
            self.client.request(points, 3, model="soft-kmeans", beta=4.0)
        self.assertIn("parameters={'beta'", str(caught.exception))

    def test_guard_runs_a_learned_model_guarded(self):
        points = blobs(512, 32, 10, spread=0.5)
        model = "learned-onehot-d32-k10"
        guarded = self.client.cluster(points, k=10, model=model, iterations=5, guard=True,
                                      return_trajectory=True)
        self.assertEqual(guarded.guard_learned_layers + guarded.guard_lloyd_layers, 5)
        self.assertTrue(np.all(np.diff(guarded.layer_objectives) <= 0))
        plain = self.client.cluster(points, k=10, model=model, iterations=5)
        self.assertEqual(plain.guard_learned_layers + plain.guard_lloyd_layers, 0)
        with self.assertRaises(kmt.ClusterError):
            self.client.cluster(points, k=10, guard=True)  # an exact model

    def test_points_offset_shifts_the_points_on_the_server(self):
        points = blobs(2000, 6, 4, spread=1.0) + np.float32(300)
        offset = points.mean(axis=0)
        start = points[:4] - offset
        shifted = self.client.cluster(points - offset, k=4, iterations=5, centers=start)
        (r,) = self.client.stream([self.client.wire_request(points, 4, iterations=5,
                                                            centers=start,
                                                            points_offset=offset)])
        self.assertTrue(r.points_offset_applied)
        got = self.client.result(r, 6, 4)
        np.testing.assert_array_equal(got.labels, shifted.labels)
        np.testing.assert_array_equal(got.centers, shifted.centers)
        self.assertEqual(got.objective, shifted.objective)
        # A server that ignores the field answers without the flag: refused.
        request = self.client.wire_request(points, 4, points_offset=offset)
        unshifted = kmt.pb.ClusterResponse(objective=1.0)
        with self.assertRaises(kmt.ServiceError) as caught:
            kmt.client._check_offset(request, unshifted)
        self.assertIn("did not apply points_offset", str(caught.exception))
        kmt.client._check_offset(self.client.wire_request(points, 4), unshifted)

    def test_raw_payloads_answer_as_repeated_fields(self):
        points = blobs(3000, 5, 4, spread=1.0)
        start = points[10:14]
        weights = np.linspace(0.5, 2, 3000)
        with kmt.Client(self.server.address, timeout=120, raw=False) as repeated:
            # Raw by default: bytes on the wire both ways, repeated fields empty.
            request = self.client.request(points, 4, centers=start, weights=weights)
            self.assertEqual(len(request.points), 0)
            self.assertEqual(request.points_f32, points.astype("<f4").tobytes())
            self.assertEqual(request.centers_f32, start.astype("<f4").tobytes())
            self.assertEqual(np.frombuffer(request.weights_f32, "<f4").tolist(),
                             weights.astype(np.float32).tolist())
            self.assertTrue(request.raw_response)
            # What the stream sends parses as that message, arrays included.
            wire = self.client.wire_request(points, 4, centers=start, weights=weights)
            self.assertEqual(kmt.pb.ClusterRequest.FromString(wire.serialize()), request)
            self.assertEqual(wire.request_id, request.request_id)
            plain = repeated.request(points, 4, centers=start, weights=weights)
            self.assertEqual((plain.points_f32, plain.raw_response), (b"", False))
            self.assertEqual(list(plain.weights), weights.astype(np.float32).tolist())
            # Fortran order and integers are converted once.
            for given in (np.asfortranarray(points), np.rint(points * 100).astype(np.int64)):
                with self.subTest(dtype=given.dtype, fortran=given.flags.f_contiguous):
                    raw = self.client.cluster(given, k=4, iterations=6, centers=start)
                    want = repeated.cluster(given, k=4, iterations=6, centers=start)
                    self.assertEqual(raw.labels.dtype, np.int32)
                    self.assertEqual(raw.centers.dtype, np.float32)
                    np.testing.assert_array_equal(raw.labels, want.labels)
                    np.testing.assert_array_equal(raw.centers, want.centers)
                    self.assertEqual(raw.objective, want.objective)
            # float64 travels raw as float64 and is clustered in double; the
            # repeated fields carry float32.
            raw = self.client.cluster(points.astype(np.float64), k=4, iterations=6, centers=start)
            want = repeated.cluster(points.astype(np.float64), k=4, iterations=6, centers=start)
            self.assertEqual((raw.centers.dtype, want.centers.dtype), (np.float64, np.float32))
            np.testing.assert_array_equal(raw.labels, want.labels)
            np.testing.assert_allclose(raw.centers, want.centers, rtol=1e-5)
            raw = list(self.client.cluster_batches(kmt.batches(points, 700, min_size=4), k=4,
                                                   iterations=3, seed=9))
            want = list(repeated.cluster_batches(kmt.batches(points, 700, min_size=4), k=4,
                                                 iterations=3, seed=9))
            self.assertEqual(len(raw), 5)
            for a, b in zip(raw, want):
                np.testing.assert_array_equal(a.labels, b.labels)
                np.testing.assert_array_equal(a.centers, b.centers)
            a = self.client.fit(points, k=4, iterations=5, batch_size=700, centers=start)
            b = repeated.fit(points, k=4, iterations=5, batch_size=700, centers=start)
            np.testing.assert_array_equal(a.labels, b.labels)
            np.testing.assert_array_equal(a.centers, b.centers)

    def test_a_call_past_its_deadline_raises_deadline_exceeded(self):
        points = blobs(60000, 32, 16, spread=2.0)
        with kmt.Client(self.server.address, timeout=0.05) as hasty:
            with self.assertRaises(kmt.ServiceError) as caught:
                list(hasty.cluster_batches([points] * 4, k=16, iterations=200))
        self.assertEqual(caught.exception.code.name, "DEADLINE_EXCEEDED")

    def test_a_failed_batch_raises_with_its_code(self):
        with self.assertRaises(kmt.ClusterError) as caught:
            self.client.cluster(blobs(10, 2, 2), k=20)
        self.assertEqual(caught.exception.code.name, "INVALID_ARGUMENT")
        self.assertIn("k", caught.exception.message)
        # The request's own error, not the connection's.
        self.assertNotIsInstance(caught.exception, ConnectionError)

    def test_init_takes_scikit_learns_names_and_lists_every_name(self):
        points = blobs(1000, 3, 4)
        ours = self.client.cluster(points, k=4, iterations=5, init="kmeans++", seed=3)
        theirs = self.client.cluster(points, k=4, iterations=5, init="k-means++", seed=3)
        np.testing.assert_array_equal(theirs.centers, ours.centers)
        np.testing.assert_array_equal(theirs.labels, ours.labels)
        with self.assertRaises(ValueError) as caught:
            self.client.cluster(points, k=4, init="kmeans+")
        for name in ("kmeans++", "k-means++", "plain-kmeans++", "random", "given"):
            self.assertIn(name, str(caught.exception))
        # k-means|| needs all the points' shards: it says where it runs.
        with self.assertRaisesRegex(ValueError, r"init 'k-means\|\|': k-means\|\| runs over "
                                                "resident shards .*kmt.fit_resident"):
            self.client.cluster(points, k=4, init="k-means||")

    def test_a_url_is_refused_saying_host_port_no_scheme(self):
        for url in ("http://localhost:50051", "https://localhost:50051/", "grpc://[::1]:50051"):
            with self.subTest(url=url):
                with self.assertRaisesRegex(ValueError, "expected host:port, no scheme") as caught:
                    kmt.Client(url)
                self.assertIn(f"'{url.split('://')[1].rstrip('/')}'", str(caught.exception))
        with self.assertRaisesRegex(ValueError, r"and tls=True for TLS"):
            kmt.Client("https://localhost:50051")
        # gRPC's own schemes still name servers.
        port = self.server.address.rsplit(":", 1)[1]
        for target in (f"dns:///localhost:{port}", f"ipv4:127.0.0.1:{port}"):
            with kmt.Client(target, timeout=60) as other:
                self.assertEqual(len(other.models()), 15)

    def test_a_request_larger_than_a_message_says_what_to_do(self):
        points = blobs(20000, 16, 4)  # 1.2 MiB of float32 points
        with kmt.Client(self.server.address, max_message_bytes=1 << 20, timeout=60) as small:
            with self.assertRaises(kmt.ServiceError) as caught:
                small.cluster(points, k=4)
        self.assertEqual(caught.exception.code.name, "RESOURCE_EXHAUSTED")
        message = caught.exception.message
        self.assertIn("larger than max", message)
        for advice in ("max_message_bytes = 1 MiB", "kmt.KMeans", "kmt.fit_resident",
                       "batch_size"):
            self.assertIn(advice, message)

    def test_kmt_server_names_the_server_of_a_client_without_one(self):
        code = ("import kmt; c = kmt.Client(); print(c.target, len(c.models()), "
                "kmt.replica_addresses())")
        package = os.path.join(SOURCE_DIR, "python")
        out = run_python(code, "/", KMT_SERVER=self.server.address, PYTHONPATH=package)
        self.assertEqual(out.split(), [self.server.address, "15",
                                       f"['{self.server.address}']"])
        env = {k: v for k, v in os.environ.items() if k != "KMT_SERVER"}
        env["PYTHONPATH"] = package
        result = subprocess.run([sys.executable, "-c", "import kmt; print(kmt.Client().target)"],
                                capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(result.stdout.strip(), "localhost:50051", result.stderr)
        # A URL there is refused as one given directly, naming the variable.
        with self.assertRaises(AssertionError) as caught:
            run_python("import kmt; kmt.Client()", "/", KMT_SERVER="http://127.0.0.1:1",
                       PYTHONPATH=package)
        self.assertIn("'http://127.0.0.1:1' (from KMT_SERVER): expected host:port, no scheme",
                      str(caught.exception))

    def python_only(self, **options):
        """A client whose cluster_each streams through gRPC's Python API, as
        where the package lacks the compiled extension."""
        client = kmt.Client(self.server.address, **options)
        client._compiled_client = lambda: (None, None)
        return client

    def each_request(self):
        """Requests of every kind cluster_each takes: WireRequests with raw
        float32 and float64 arrays, a points offset and weights, and a plain
        ClusterRequest with repeated fields."""
        points = blobs(3000, 5, 4, spread=1.0)
        start = points[:4]
        return [
            self.client.wire_request(points, 4, iterations=6, centers=start, request_id="a"),
            self.client.wire_request(points.astype(np.float64) + 500.0, 4, iterations=6,
                                     centers=start.astype(np.float64),
                                     points_offset=np.full(5, 500.0), request_id="b"),
            self.client.wire_request(points, 4, iterations=6, init="k-means++", seed=7,
                                     weights=np.linspace(0.5, 2.0, len(points)),
                                     request_id="c"),
            kmt.Client(self.server.address, raw=False).request(points[:500], 3, iterations=4,
                                                               request_id="d"),
        ]

    @staticmethod
    def answers(responses):
        """Responses' bytes, every field but the server's timing."""
        for r in responses:
            r.ClearField("timing")
        return [r.SerializeToString() for r in responses]

    def test_cluster_each_answers_what_stream_answers_compiled_or_not(self):
        answers = self.answers
        want = answers(list(self.client.stream(self.each_request())))
        self.assertEqual([kmt.pb.ClusterResponse.FromString(w).request_id for w in want],
                         ["a", "b", "c", "d"])
        with self.python_only() as plain:
            for name, client in (("compiled", self.client), ("python", plain)):
                with self.subTest(client=name):
                    got = []
                    client.cluster_each(self.each_request(), got.append)
                    self.assertEqual(answers(got), want)
        if os.environ.get("KMT_EXTENSION_DIR"):
            # The build has the extension: the stream above ran in it.
            self.assertIsNotNone(self.client._compiled)

    def test_a_session_answers_what_stream_answers_compiled_or_not(self):
        answers = self.answers
        want = answers(list(self.client.stream(self.each_request())))
        # No timeout: with one, each request would have a stream of its own.
        with kmt.Client(self.server.address) as compiled, self.python_only() as plain:
            for name, client in (("compiled", compiled), ("python", plain)):
                with self.subTest(client=name), client.session() as session:
                    self.assertEqual(answers([session.call(r) for r in self.each_request()]),
                                     want)
                    # A failed batch raises, and the session goes on.
                    with self.assertRaises(kmt.ClusterError) as caught:
                        session.call(client.wire_request(blobs(10, 2, 2), k=20, request_id="bad"))
                    self.assertEqual(caught.exception.request_id, "bad")
                    self.assertEqual(caught.exception.code.name, "INVALID_ARGUMENT")
                    self.assertEqual(answers([session.call(self.each_request()[0])]), want[:1])
            if os.environ.get("KMT_EXTENSION_DIR"):
                # The build has the extension: the calls above ran in it.
                self.assertIsNotNone(compiled._compiled)

    def endless_requests(self, drawn):
        """Requests without end, each index added to `drawn` as it is read,
        the fourth a failed batch ("bad"): a stream must stop asking."""
        for i in itertools.count():
            drawn.append(i)
            yield (self.client.wire_request(blobs(10, 2, 2), k=20, request_id="bad")
                   if i == 3 else
                   self.client.wire_request(blobs(200, 2, 2), k=2, request_id=f"{i}"))

    def test_cluster_each_stops_at_a_failed_batch(self):
        for name, client in (("compiled", self.client), ("python", self.python_only())):
            with self.subTest(client=name):
                drawn, got = [], []
                with self.assertRaises(kmt.ClusterError) as caught:
                    client.cluster_each(self.endless_requests(drawn), got.append)
                self.assertEqual(caught.exception.request_id, "bad")
                self.assertEqual(caught.exception.code.name, "INVALID_ARGUMENT")
                self.assertEqual([r.request_id for r in got], ["0", "1", "2"])
                self.assertLessEqual(len(drawn), 4 + client.window)

    def test_stream_answers_the_same_compiled_or_not_and_lets_its_reader_stop(self):
        answers = self.answers
        want = answers(list(self.python_only().stream(self.each_request())))
        for name, client in (("compiled", self.client), ("python", self.python_only())):
            with self.subTest(client=name):
                self.assertEqual(answers(list(client.stream(self.each_request()))), want)
                # The responses before a failed batch, then its error.
                drawn, got = [], []
                with self.assertRaises(kmt.ClusterError) as caught:
                    for r in client.stream(self.endless_requests(drawn)):
                        got.append(r.request_id)
                self.assertEqual(caught.exception.request_id, "bad")
                self.assertEqual(got, ["0", "1", "2"])
                self.assertLessEqual(len(drawn), 4 + client.window)
                # A reader that stops after one response stops the requests.
                drawn = []
                stream = client.stream(self.endless_requests(drawn))
                self.assertEqual(next(stream).request_id, "0")
                stream.close()
                self.assertLessEqual(len(drawn), 2 + 2 * client.window)
                self.assertEqual(answers(list(client.stream(self.each_request()[:1]))),
                                 want[:1])
                # A reader that calls the same client, and takes its time,
                # while the stream waits for it.
                got = []
                for r in client.stream(self.each_request() * 4):
                    got.append(r)
                    client.cluster(blobs(300, 2, 2), k=2, iterations=2)
                    time.sleep(0.01)
                self.assertEqual(answers(got), want * 4)
        if os.environ.get("KMT_EXTENSION_DIR"):
            # The build has the extension: the compiled streams ran in it.
            self.assertIsNotNone(self.client._compiled)

    def test_cluster_each_raises_what_the_requests_and_the_callback_raise(self):
        def requests():
            yield self.client.wire_request(blobs(200, 2, 2), k=2, request_id="first")
            raise KeyError("the caller's own")

        def refuse(response):
            raise ArithmeticError(f"refused {response.request_id}")
        for name, client in (("compiled", self.client), ("python", self.python_only())):
            with self.subTest(client=name):
                got = []
                with self.assertRaises(KeyError):
                    client.cluster_each(requests(), got.append)
                self.assertEqual([r.request_id for r in got], ["first"])
                with self.assertRaisesRegex(ArithmeticError, "refused a"):
                    client.cluster_each(self.each_request(), refuse)
                # The client streams on afterwards.
                got = []
                client.cluster_each(self.each_request()[:1], got.append)
                self.assertEqual(len(got), 1)

    def test_cluster_each_keeps_the_clients_deadline_and_message_limit(self):
        points = blobs(60000, 32, 16, spread=2.0)
        slow = [self.client.wire_request(points, 16, iterations=200)] * 4
        with kmt.Client(self.server.address, timeout=0.05) as hasty:
            with self.assertRaises(kmt.ServiceError) as caught:
                hasty.cluster_each(slow, lambda response: None)
            self.assertEqual(caught.exception.code.name, "DEADLINE_EXCEEDED")
        with kmt.Client(self.server.address, max_message_bytes=1 << 20, timeout=60) as small:
            with self.assertRaises(kmt.ServiceError) as caught:
                small.cluster_each([small.wire_request(blobs(20000, 16, 4), 4)],
                                   lambda response: None)
        self.assertEqual(caught.exception.code.name, "RESOURCE_EXHAUSTED")
        self.assertIn("max_message_bytes = 1 MiB", caught.exception.message)

    def forked_call(self):
        """What kmt.Client(...).models() does in a child forked from this
        process: "worked", or the RuntimeError's message."""
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child runs nothing of the tests but this call
            os.close(read)
            signal.alarm(60)  # a hang ends the child, and shows as no outcome
            try:
                kmt.Client(self.server.address, timeout=30).models()
                outcome = "worked"
            except RuntimeError as e:
                outcome = str(e)
            except BaseException as e:  # noqa: B902 (reported, not raised, in the child)
                outcome = f"failed otherwise: {e!r}"
            os.write(write, outcome.encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            outcome = pipe.read().decode()
        os.waitpid(pid, 0)
        return outcome

    def test_a_child_forked_after_the_compiled_client_is_told_why(self):
        self.client.cluster(blobs(100, 2, 2), k=2)
        if self.client._compiled is None:  # a build without kmt._driver
            self.assertEqual(self.forked_call(), "worked")
            return
        outcome = self.forked_call()
        for says in ("forked from one that had used kmt's compiled extension", "'spawn'",
                     "KMT_COMPILED_STREAMS=0 and GRPC_ENABLE_FORK_SUPPORT=true"):
            self.assertIn(says, outcome)

    def test_compiled_streams_and_grpcs_fork_support_a_forked_child_clusters(self):
        # gRPC's Python API survives fork only with gRPC's fork support,
        # which is off by default: without it the child's calls fail.
        code = f"""
import os, numpy as np, kmt
points = np.random.default_rng(1).normal(size=(500, 3))
fitted = kmt.KMeans(3, n_init=1, random_state=0, server="{self.server.address}").fit(points)
fitted.predict(points)
assert kmt.Client("{self.server.address}")._compiled_client() == (None, None)
pid = os.fork()
if pid == 0:
    again = kmt.KMeans(3, n_init=1, random_state=0, server="{self.server.address}").fit(points)
    os._exit(0 if np.array_equal(again.labels_, fitted.labels_) else 3)
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""
        self.assertEqual(run_python(code, "/", KMT_COMPILED_STREAMS="0",
                                    GRPC_ENABLE_FORK_SUPPORT="true",
                                    PYTHONPATH=os.path.join(SOURCE_DIR, "python")).strip(), "0")

    def test_batches_cover_the_rows_in_order(self):
        points = np.arange(23 * 2, dtype=np.float32).reshape(23, 2)
        sizes = [len(b) for b in kmt.batches(points, 5)]
        self.assertEqual(sizes, [5, 5, 5, 5, 3])
        # A last block shorter than min_size joins the one before.
        self.assertEqual([len(b) for b in kmt.batches(points, 5, min_size=4)], [5, 5, 5, 8])
        np.testing.assert_array_equal(np.concatenate(list(kmt.batches(points, 5, 4))), points)

    def test_cluster_batches_answers_every_block_in_order(self):
        points = blobs(2000, 2, 3)
        results = list(self.client.cluster_batches(kmt.batches(points, 300, min_size=250), k=3,
                                                   iterations=5))
        self.assertEqual([r.request_id for r in results], [f"batch-{i}" for i in range(6)])
        self.assertEqual(sum(len(r.labels) for r in results), 2000)
        self.assertEqual(len(results[-1].labels), 500)

    def test_fit_is_lloyds_on_the_whole_dataset(self):
        points = blobs(5000, 4, 6, spread=1.0)
        start = points[:6]
        whole = self.client.fit(points, k=6, iterations=8, batch_size=700, centers=start)
        np.testing.assert_allclose(whole.centers, lloyd(points, start, whole.passes),
                                   rtol=0, atol=1e-4)
        self.assertEqual(whole.labels.shape, (5000,))
        distances = ((points[:, None, :].astype(np.float64) - whole.centers[None]) ** 2).sum(-1)
        self.assertAlmostEqual(whole.objective, distances.min(1).sum(),
                               delta=1e-4 * whole.objective)

    def test_fit_with_server_initialisation_on_a_sample(self):
        points = blobs(3000, 2, 5)
        whole = self.client.fit(points, k=5, iterations=20, batch_size=1000, sample_size=500)
        self.assertEqual(whole.centers.shape, (5, 2))
        self.assertLess(whole.passes, 20)  # well separated blobs settle

    def test_fit_refuses_a_batch_size_below_one_before_asking_the_server(self):
        # A client whose server is not there: the refusal comes first.
        with kmt.Client("127.0.0.1:1", timeout=5) as absent:
            with self.assertRaisesRegex(ValueError, "batch_size 0 is not positive"):
                absent.fit(blobs(300, 2, 3), k=3, batch_size=0)

    def test_stubs_generated_at_import_leave_nothing_behind(self):
        with tempfile.TemporaryDirectory() as work:
            home, temp = os.path.join(work, "home"), os.path.join(work, "tmp")
            os.makedirs(home)
            os.makedirs(temp)
            out = run_python(
                f"import kmt; print(len(kmt.Client('{self.server.address}').models()))",
                cwd=work, PYTHONPATH=os.path.join(SOURCE_DIR, "python"), HOME=home, TMPDIR=temp,
                XDG_CACHE_HOME=os.path.join(work, "cache"))
            self.assertEqual(out.strip(), "15")  # nine exact, six learned
            self.assertEqual(os.listdir(home), [])
            self.assertEqual(os.listdir(temp), [])
            self.assertFalse(os.path.exists(os.path.join(work, "cache")))

    def test_the_docs_example_runs_from_any_directory(self):
        with tempfile.TemporaryDirectory() as work:
            result = subprocess.run(
                [sys.executable, os.path.join(SOURCE_DIR, "docs/examples/python_client.py"),
                 f"--server={self.server.address}"],
                cwd=work, capture_output=True, text=True, timeout=300)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("1000 labels, 4 centers", result.stdout)


class DefaultsTest(unittest.TestCase):
    def test_enum_names_are_the_servers_read_from_the_descriptors(self):
        self.assertEqual(kmt.client.INITS, {"kmeans++": kmt.pb.INIT_KMEANS_PLUS_PLUS,
                                            "random": kmt.pb.INIT_RANDOM,
                                            "given": kmt.pb.INIT_GIVEN,
                                            "plain-kmeans++": kmt.pb.INIT_PLAIN_KMEANS_PLUS_PLUS,
                                            "two-level": kmt.pb.INIT_TWO_LEVEL})
        self.assertEqual(kmt.client.EMPTY_CLUSTERS["relocate-farthest"],
                         kmt.pb.EMPTY_CLUSTERS_RELOCATE_FARTHEST)
        self.assertEqual(kmt.client.EMPTY_CLUSTERS["keep"], kmt.pb.EMPTY_CLUSTERS_KEEP)
        self.assertEqual(kmt.client.enum_names(kmt.pb.Distances),
                         {"none": kmt.pb.DISTANCES_NONE, "nearest": kmt.pb.DISTANCES_NEAREST,
                          "all": kmt.pb.DISTANCES_ALL})

    def test_message_limit_is_the_servers_and_the_cpp_clients(self):
        # The one C++ constant both ends take their default from.
        with open(os.path.join(SOURCE_DIR, "proto/channel_tuning.h")) as header:
            found = re.search(r"constexpr int kMaxMessageBytes = ([0-9<*+ ]+);", header.read())
        self.assertIsNotNone(found, "kMaxMessageBytes not found in proto/channel_tuning.h")
        self.assertEqual(kmt.client.MAX_MESSAGE_BYTES, eval(found.group(1), {"__builtins__": {}}))
        default = inspect.signature(kmt.Client).parameters["max_message_bytes"].default
        self.assertEqual(default, kmt.client.MAX_MESSAGE_BYTES)


if __name__ == "__main__":
    unittest.main(verbosity=2)
