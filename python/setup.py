"""Builds the package with its stubs: kmt/_generated is generated from the
checkout's proto/ when the package is built, so the installed package needs
neither the checkout nor protoc (the metadata is in pyproject.toml)."""
import importlib.util
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildWithStubs(build_py):
    def run(self):
        super().run()
        # stubs.py alone: importing the package would load stubs it has not yet.
        spec = importlib.util.spec_from_file_location("kmt_stubs_build",
                                                      os.path.join(HERE, "kmt", "stubs.py"))
        stubs = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(stubs)
        proto = stubs.checkout_proto()
        if not os.path.exists(proto):
            raise RuntimeError(f"no {proto}: build the package from a checkout")
        out = os.path.join(self.build_lib, "kmt", "_generated")
        shutil.rmtree(out, ignore_errors=True)
        stubs.generate(proto, out)


setup(cmdclass={"build_py": BuildWithStubs})
