"""The protobuf messages and the gRPC stub of kmt.v1, generated from
proto/kmeans_transformer.proto with protoc and the gRPC Python plugin
(Debian's protobuf-compiler and protobuf-compiler-grpc).

An installed package (pip install python/, or scripts/install-python-client.sh)
carries stubs generated at install time in kmt/_generated. Used in place from
a checkout, the package generates them at import into a private temporary
directory, imports them and removes the directory: an import writes nothing
that outlives it, in the home directory or anywhere else.
"""
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
    for `proto` into `out_dir`, which must not exist, atomically: a reader
    never sees half."""
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".kmt-stubs-", dir=parent)
    try:
        subprocess.run(
            ["protoc", f"-I{os.path.dirname(os.path.abspath(proto))}", f"--python_out={work}",
             f"--grpc_out={work}", f"--plugin=protoc-gen-grpc={GRPC_PLUGIN}",
             os.path.abspath(proto)],
            check=True, capture_output=True, text=True)
        os.rename(work, out_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _import(path):
    # The generated stub imports the messages by their top-level name.
    sys.path.insert(0, path)
    try:
        import kmeans_transformer_pb2 as pb
        import kmeans_transformer_pb2_grpc as rpc
    finally:
        sys.path.remove(path)
    return pb, rpc


def load():
    """(messages module, stub module)."""
    if os.path.isdir(INSTALLED_DIR):
        return _import(INSTALLED_DIR)
    proto = checkout_proto()
    if not os.path.exists(proto):
        raise ImportError(f"kmt: no generated stubs in {INSTALLED_DIR} and no {proto} to "
                          "generate them from; install the package (pip install python/)")
    work = tempfile.mkdtemp(prefix="kmt-stubs-")
    try:
        out = os.path.join(work, "stubs")
        try:
            generate(proto, out)
        except (OSError, subprocess.CalledProcessError) as e:
            detail = getattr(e, "stderr", None) or e
            raise ImportError(f"kmt: cannot generate the stubs from {proto} with protoc and "
                              f"{GRPC_PLUGIN}: {detail}") from e
        return _import(out)
    finally:
        # Imported modules live on in memory; their files are not needed.
        shutil.rmtree(work, ignore_errors=True)
