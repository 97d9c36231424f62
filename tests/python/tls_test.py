"""The Python client over TLS and mutual TLS to a real kmt-server, with
certificates made by openssl in the test: who is served, who is refused, the
server name override, and kmt.KMeans fitting over mutual TLS."""
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

SOURCE_DIR = os.environ["KMT_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests/deploy"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))

import kmt  # noqa: E402
from harness import Server  # noqa: E402


def openssl(*args):
    subprocess.run(["/usr/bin/openssl", *args], check=True, capture_output=True, timeout=60)


class Pki:
    """CAs and the certificates they sign, for localhost and 127.0.0.1."""

    def __init__(self, directory):
        self.dir = directory
        with open(self.path("san", ".cnf"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n")

    def path(self, name, ext):
        return os.path.join(self.dir, name + ext)

    def make_ca(self, name):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-days", "2", "-subj", f"/CN={name}", "-keyout", self.path(name, ".key"),
                "-out", self.path(name, ".pem"))

    def make_leaf(self, name, ca):
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-subj", "/CN=localhost", "-keyout", self.path(name, ".key"), "-out",
                self.path(name, ".csr"))
        openssl("x509", "-req", "-in", self.path(name, ".csr"), "-CA", self.path(ca, ".pem"),
                "-CAkey", self.path(ca, ".key"), "-CAcreateserial", "-days", "2", "-extfile",
                self.path("san", ".cnf"), "-out", self.path(name, ".pem"))


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pki = Pki(tempfile.mkdtemp(prefix="kmt-tls-"))
        for ca in ("ca-a", "ca-b"):
            cls.pki.make_ca(ca)
        cls.pki.make_leaf("server", "ca-a")
        cls.pki.make_leaf("client-a", "ca-a")
        cls.pki.make_leaf("client-b", "ca-b")
        tls = (f"--tls_cert={cls.pki.path('server', '.pem')}",
               f"--tls_key={cls.pki.path('server', '.key')}")
        cls.tls = Server("--model_dir=", *tls)
        cls.mutual = Server("--model_dir=", *tls, f"--tls_client_ca={cls.pki.path('ca-a', '.pem')}")

    @classmethod
    def tearDownClass(cls):
        assert cls.tls.stop() == 0
        assert cls.mutual.stop() == 0

    def reach(self, server, **tls):
        """The status code of a batch sent with these settings (OK if served)."""
        points = np.arange(40, dtype=np.float32).reshape(20, 2)
        with kmt.Client(f"localhost:{server.port}", timeout=10, max_attempts=1, **tls) as client:
            try:
                result = client.cluster(points, k=2, iterations=3)
            except kmt.ServiceError as e:
                return e.code.name
        self.assertEqual(result.labels.shape, (20,))
        return "OK"

    def test_tls_serves_clients_trusting_its_ca_and_no_other(self):
        ca = self.pki.path("ca-a", ".pem")
        self.assertEqual(self.reach(self.tls, ca=ca), "OK")
        self.assertEqual(self.reach(self.tls), "UNAVAILABLE")  # plaintext
        self.assertEqual(self.reach(self.tls, ca=self.pki.path("ca-b", ".pem")), "UNAVAILABLE")
        # The name verified is the one given, whatever address is dialled.
        self.assertEqual(self.reach(self.tls, ca=ca, server_name="kmt.example.com"),
                         "UNAVAILABLE")
        with kmt.Client(f"127.0.0.1:{self.tls.port}", timeout=10, ca=ca,
                        server_name="localhost") as client:
            self.assertEqual(len(client.models()), 9)

    def test_mutual_tls_serves_only_clients_with_a_certificate_from_its_ca(self):
        ca = self.pki.path("ca-a", ".pem")
        self.assertEqual(self.reach(self.mutual, ca=ca), "UNAVAILABLE")
        self.assertEqual(self.reach(self.mutual, ca=ca, cert=self.pki.path("client-b", ".pem"),
                                    key=self.pki.path("client-b", ".key")), "UNAVAILABLE")
        self.assertEqual(self.reach(self.mutual, ca=ca, cert=self.pki.path("client-a", ".pem"),
                                    key=self.pki.path("client-a", ".key")), "OK")

    def test_an_estimator_fits_over_mutual_tls_in_one_request_and_as_a_resident_job(self):
        points = np.random.default_rng(2).normal(size=(3000, 4))
        tls = dict(ca=self.pki.path("ca-a", ".pem"), cert=self.pki.path("client-a", ".pem"),
                   key=self.pki.path("client-a", ".key"))
        fits = [kmt.KMeans(3, init=points[:3], n_init=1, server=f"localhost:{self.mutual.port}",
                           batch_size=batch_size, timeout=30, **tls).fit(points)
                for batch_size in (None, 1000)]
        np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
        np.testing.assert_array_equal(fits[0].predict(points), fits[0].labels_)
        # Without the client certificate the fit cannot reach the server.
        with self.assertRaises(kmt.ServiceError) as caught:
            kmt.KMeans(3, n_init=1, server=f"localhost:{self.mutual.port}", timeout=10,
                       ca=tls["ca"]).fit(points)
        self.assertEqual(caught.exception.code.name, "UNAVAILABLE")

    def test_bad_settings_are_named(self):
        with self.assertRaises(OSError) as caught:
            kmt.Client("localhost:1", ca=self.pki.path("missing", ".pem"))
        self.assertIn(f"cannot read CA {self.pki.path('missing', '.pem')}", str(caught.exception))
        with self.assertRaises(ValueError):
            kmt.Client("localhost:1", cert=self.pki.path("client-a", ".pem"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
