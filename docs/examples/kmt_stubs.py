"""Python stubs for kmt.v1, generated from proto/ with protoc and the gRPC
Python plugin (Debian: protobuf-compiler, protobuf-compiler-grpc), shared by
the examples next to this file."""
import os
import subprocess
import sys


def generate_stubs(proto_dir, out_dir):
    """Writes kmeans_transformer_pb2(_grpc).py to out_dir and puts it on sys.path."""
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run(
        ["protoc", f"-I{proto_dir}", f"--python_out={out_dir}", f"--grpc_out={out_dir}",
         "--plugin=protoc-gen-grpc=/usr/bin/grpc_python_plugin",
         os.path.join(proto_dir, "kmeans_transformer.proto")],
        check=True)
    sys.path.insert(0, out_dir)
