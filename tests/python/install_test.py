"""Installing the Python package as python/README.md says, on Debian 12,
whose Python refuses pip's writes (externally-managed-environment): into a
directory of its own with pip --target, into a virtual environment that
sees Debian's packages, and with scripts/install-python-client.sh. Each
installed package carries its stubs, needs neither the checkout nor protoc,
reaches the server KMT_SERVER names, and has the project's version, which
kmt/__init__.py, the package's metadata and the top CMakeLists.txt agree
on."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

SOURCE_DIR = os.environ["KMT_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests/deploy"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "python"))

import kmt  # noqa: E402
from harness import Server  # noqa: E402

PYTHON = "/usr/bin/python3"  # Debian's, with its packages
# What an installed package prints: where it was imported from, its version
# and its metadata's, and the models of the server KMT_SERVER names.
PROBE = ("import importlib.metadata, kmt; print(kmt.__file__); print(kmt.__version__); "
         "print(importlib.metadata.version('kmt')); print(len(kmt.Client().models()))")
# A resident job of 20 points on the server KMT_SERVER names: where the
# compiled driver came from, and the iterations run; or, without the driver,
# whether the error says how to get it.
RESIDENT = ("import kmt, numpy as np\n"
            "try:\n"
            "    r = kmt.fit_resident(None, np.arange(40, dtype=np.float32).reshape(20, 2), 2,\n"
            "                         iterations=3)\n"
            "    print(kmt._driver.__file__, r.iterations_run)\n"
            "except ImportError as e:\n"
            "    print('missing', 'install-python-client.sh' in str(e))\n")


def project_version():
    """The version in the top CMakeLists.txt's project()."""
    with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
        found = re.search(r"project\(\s*\w+\s+VERSION\s+([0-9.]+)", f.read())
    return found.group(1)


def copy_of_the_checkout(work):
    """The parts of the checkout the package is built from, copied, so that a
    build leaves nothing in the checkout: the python/ directory of the copy."""
    shutil.copytree(os.path.join(SOURCE_DIR, "python"), os.path.join(work, "src/python"),
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    shutil.copytree(os.path.join(SOURCE_DIR, "proto"), os.path.join(work, "src/proto"))
    return os.path.join(work, "src/python")


def run(args, **env):
    result = subprocess.run(args, capture_output=True, text=True, timeout=300,
                            env={**os.environ, **env})
    if result.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result.stdout


class InstallTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--model_dir=")

    @classmethod
    def tearDownClass(cls):
        assert cls.server.stop() == 0

    def check_installed(self, python, where, **env):
        """The package `python` imports (with `env`) is the one in `where`,
        with its stubs, the project's version, and KMT_SERVER's server."""
        out = run([python, "-c", PROBE], KMT_SERVER=self.server.address, PATH="/nonexistent",
                  **env)
        version = project_version()
        self.assertEqual(out.split(), [os.path.join(where, "kmt", "__init__.py"), version,
                                       version, "9"])  # the nine exact models
        # pip builds no compiled driver: a resident job says where to get it.
        out = run([python, "-c", RESIDENT], KMT_SERVER=self.server.address, PATH="/nonexistent",
                  KMT_EXTENSION_DIR="", **env)
        self.assertEqual(out.split(), ["missing", "True"])

    def test_the_versions_agree(self):
        self.assertEqual(kmt.__version__, project_version())
        with open(os.path.join(SOURCE_DIR, "python/pyproject.toml")) as f:
            pyproject = f.read()
        # pyproject.toml reads the version from the package: no second copy.
        self.assertIn('dynamic = ["version"]', pyproject)
        self.assertIn('version = {attr = "kmt.__version__"}', pyproject)
        self.assertNotRegex(pyproject, r'(?m)^version\s*=\s*"')

    def test_pip_into_a_target_directory(self):
        with tempfile.TemporaryDirectory() as work:
            source = copy_of_the_checkout(work)
            target, home = os.path.join(work, "site"), os.path.join(work, "home")
            os.makedirs(home)
            # As python/README.md gives it for Debian 12.
            run([PYTHON, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                 "--target", target, source], HOME=home)
            shutil.rmtree(os.path.join(work, "src"))
            self.check_installed(PYTHON, target, PYTHONPATH=target, HOME=home)

    def test_pip_into_a_virtual_environment_with_debians_packages(self):
        with tempfile.TemporaryDirectory() as work:
            source = copy_of_the_checkout(work)
            env = os.path.join(work, "kmt-env")
            home = os.path.join(work, "home")
            os.makedirs(home)
            # Debian's pip, seen through the system's site packages, installs
            # into the environment (no python3-venv needed for its own pip).
            run([PYTHON, "-m", "venv", "--system-site-packages", "--without-pip", env])
            python = os.path.join(env, "bin/python")
            run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps", source],
                HOME=home)
            shutil.rmtree(os.path.join(work, "src"))
            site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
            self.check_installed(python, site.strip(), HOME=home)

    def test_the_script_installs_into_a_directory(self):
        with tempfile.TemporaryDirectory() as work:
            target = os.path.join(work, "site")
            run([os.path.join(SOURCE_DIR, "scripts/install-python-client.sh"), target])
            # No metadata without pip: the version alone.
            out = run([PYTHON, "-c", "import kmt; print(kmt.__file__, kmt.__version__, "
                       "len(kmt.Client().models()))"], KMT_SERVER=self.server.address,
                      PYTHONPATH=target, PATH="/nonexistent")
            self.assertEqual(out.split(), [os.path.join(target, "kmt", "__init__.py"),
                                           project_version(), "9"])
            # The script installs the compiled driver beside the package.
            out = run([PYTHON, "-c", RESIDENT], KMT_SERVER=self.server.address,
                      PYTHONPATH=target, PATH="/nonexistent", KMT_EXTENSION_DIR="")
            driver, iterations = out.split()
            self.assertTrue(driver.startswith(os.path.join(target, "kmt", "_driver")), driver)
            self.assertLessEqual(int(iterations), 3)


if __name__ == "__main__":
    unittest.main(verbosity=2)
