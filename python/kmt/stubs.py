"""The protobuf messages and the gRPC stub of kmt.v1, generated from
proto/kmeans_transformer.proto with protoc and the gRPC Python plugin
(Debian's protobuf-compiler and protobuf-compiler-grpc).

An installed package (scripts/install-python-client.sh) carries stubs
generated at install time. Used in place from a checkout, the package
generates them on first use into a cache directory keyed by the proto's
contents ($XDG_CACHE_HOME/kmt, else ~/.cache/kmt), so a changed proto gets
new stubs and any working directory works.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

PROTO_NAME = "kmeans_transformer.proto"
GRPC_PLUGIN = "/usr/bin/grpc_python_plugin"
_HERE = os.path.dirname(os.path.abspath(__file__))
INSTALLED_DIR = os.path.join(_HERE, "_generated")


def checkout_proto():
    """The proto of the checkout this package lives in."""
    return os.path.join(os.path.dirname(os.path.dirname(_HERE)), "proto", PROTO_NAME)


def generate(proto, out_dir):
    """Writes kmeans_transformer_pb2.py and kmeans_transformer_pb2_grpc.py
    for `proto` into `out_dir`, atomically: a reader never sees half."""
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".kmt-stubs-", dir=parent)
    try:
        subprocess.run(
            ["protoc", f"-I{os.path.dirname(os.path.abspath(proto))}", f"--python_out={work}",
             f"--grpc_out={work}", f"--plugin=protoc-gen-grpc={GRPC_PLUGIN}",
             os.path.abspath(proto)],
            check=True, capture_output=True, text=True)
        try:
            os.rename(work, out_dir)
        except OSError:
            if not os.path.isdir(out_dir):  # not another process's stubs
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def cache_dir(proto):
    with open(proto, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kmt", f"stubs-{digest}")


def stub_dir():
    """Where the generated modules are, generating them if need be."""
    if os.path.isdir(INSTALLED_DIR):
        return INSTALLED_DIR
    proto = checkout_proto()
    if not os.path.exists(proto):
        raise ImportError(f"kmt: no generated stubs in {INSTALLED_DIR} and no {proto} to "
                          "generate them from; install with scripts/install-python-client.sh")
    out = cache_dir(proto)
    if not os.path.isdir(out):
        generate(proto, out)
    return out


def load():
    """(messages module, stub module)."""
    path = stub_dir()
    # The generated stub imports the messages by their top-level name.
    if path not in sys.path:
        sys.path.append(path)
    import kmeans_transformer_pb2 as pb
    import kmeans_transformer_pb2_grpc as rpc
    return pb, rpc
