"""scikit-learn's own estimator checks (sklearn.utils.estimator_checks, as
check_estimator runs them) on every kmt estimator through a real kmt-server,
each check its own subtest. The only checks skipped are those the estimator
declares as scikit-learn's KMeans declares them (zero weights are not the
same as removed samples, and spherical k-means' points of norm 0), each for
its stated reason, and those that need pandas when it is missing."""
import unittest
import warnings
from unittest import SkipTest

from sklearn.utils.estimator_checks import _get_check_estimator_ids, check_estimator

from estimator_support import ServedTest, kmt



class EstimatorChecksTest(ServedTest):
    def run_checks(self, estimator):
        xfail = estimator._get_tags()["_xfail_checks"]
        allowed = [*xfail.values(), "pandas"]  # the declared reasons; pandas' absence
        ran, skipped = 0, 0
        for checked, check in check_estimator(estimator, generate_only=True):
            name = _get_check_estimator_ids(check)
            with self.subTest(check=name):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        check(checked)
                    ran += 1
                except SkipTest as e:
                    skipped += 1
                    self.assertTrue(any(reason in str(e) for reason in allowed), str(e))
        # Every check ran but the declared ones and those of pandas (at most
        # its Series of weights and its DataFrame's column names).
        self.assertLessEqual(skipped, len(xfail) + 2)
        self.assertGreater(ran, 30)

    def test_kmeans(self):
        self.run_checks(kmt.KMeans(server=self.server.address))

    def test_kmeans_with_restarts_and_sklearns_n_init_default(self):
        self.run_checks(kmt.KMeans(n_clusters=3, init="random", server=self.server.address))

    def test_minibatch_kmeans(self):
        self.run_checks(kmt.MiniBatchKMeans(n_init="auto", server=self.server.address))

    def test_variants(self):
        for estimator in (kmt.SoftKMeans, kmt.SphericalKMeans, kmt.TrimmedKMeans,
                          kmt.RobustKMeans, kmt.KMedoids):
            with self.subTest(estimator=estimator.__name__):
                # Those without sample_weight skip scikit-learn's weight checks.
                self.run_checks(estimator(server=self.server.address))


if __name__ == "__main__":
    unittest.main(verbosity=2)
