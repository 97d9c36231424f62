#!/usr/bin/env bash
# Builds the Dockerfile into kmeans-transformer:0.1.0 with buildah, without an
# image registry: base images debian:bookworm and debian:bookworm-slim
# already in podman's store (pulled from a registry) are used as they are;
# missing ones are made from a Debian 12 root bootstrapped from the package
# mirror (debootstrap), once, and kept in the store. The builder and podman
# come from `scripts/install-deps.sh --container`. Prints the image's name.
#   scripts/build-image.sh     (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
image=kmeans-transformer:0.1.0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

scripts/install-deps.sh --container >&2

for base in debian:bookworm debian:bookworm-slim; do
  podman image exists "$base" && continue
  if [[ ! -e "$work/root/etc/debian_version" ]]; then
    debootstrap --variant=minbase bookworm "$work/root" >"$work/debootstrap.log" 2>&1 ||
      { cat "$work/debootstrap.log" >&2; exit 1; }
    rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
  fi
  tar -C "$work/root" -c . | podman import -q - "$base" >/dev/null
done

buildah build --layers --isolation=chroot -t "$image" . >"$work/build.log" 2>&1 ||
  { tail -50 "$work/build.log" >&2; exit 1; }
echo "$image"
