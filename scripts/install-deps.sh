#!/usr/bin/env bash
# Installs, from Debian 12 packages, everything needed to build and test the
# project. Idempotent and quiet when everything is already there.
#   scripts/install-deps.sh           build + test dependencies
#   scripts/install-deps.sh --build   only what compiling the programs needs
#                                     (configure with -DKMT_BUILD_TESTS=OFF
#                                     -DKMT_BUILD_BENCHMARKS=OFF)
#   scripts/install-deps.sh --runtime only the shared libraries the binaries load
#   scripts/install-deps.sh --container the image builder and runtime for
#                                     scripts/build-image.sh
set -euo pipefail

# mold links the project's hundred programs (tests, tools, benchmarks) in a
# tenth of GNU ld's time; CMakeLists.txt uses it where it is installed.
build_packages=(
  g++ make cmake pkg-config mold
  libeigen3-dev libabsl-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  prometheus-cpp-dev civetweb libcivetweb-dev zlib1g-dev libcurl4-openssl-dev
)
# Tests, benchmarks, formatting, fuzzing (clang, with LLVM's OpenMP runtime
# and headers: the engine's OpenMP under clang), certificates for the TLS
# tests (openssl), and the Python client's dependencies, with what builds and
# installs it as a package (setuptools, wheel, pip; Python's headers and
# pybind11 for its compiled driver, kmt._driver), scikit-learn, and Dask
# for kmt.dask (pandas for its DataFrames); FAISS's library and its Python
# module, the speed peers of the C++ and Python benchmarks.
test_packages=(
  git ca-certificates clang-format openssl clang libclang-rt-14-dev libomp-14-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  prometheus libfaiss-dev python3-faiss libopenblas0-openmp
  python3 python3-dev pybind11-dev python3-grpcio python3-protobuf python3-numpy python3-yaml
  python3-sklearn python3-setuptools python3-wheel python3-pip
  python3-dask python3-distributed python3-pandas
)
container_packages=(buildah podman runc fuse-overlayfs debootstrap)
runtime_packages=(
  libgrpc++1.51 libprotobuf32 libabsl20220623 libprometheus-cpp-pull1.0
  libprometheus-cpp-core1.0 libgomp1 ca-certificates
)

case "${1:-}" in
  "") packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  --build) packages=("${build_packages[@]}") ;;
  --runtime) packages=("${runtime_packages[@]}") ;;
  --container) packages=("${container_packages[@]}") ;;
  *) echo "usage: $0 [--build | --runtime | --container]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -ne 0 ]] && sudo="sudo"
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
