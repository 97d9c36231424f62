# kmeans-transformer: the gRPC server with the models shipped in models/.
#   docker build -t kmeans-transformer:0.1.0 .
#   docker run -p 50051:50051 -p 9464:9464 kmeans-transformer:0.1.0
# Ports: 50051 gRPC (kmt.v1.KMeansTransformer, grpc.health.v1, reflection),
#        9464 Prometheus /metrics.
# No HEALTHCHECK: orchestrators probe grpc.health.v1 on 50051.

FROM debian:bookworm AS build
WORKDIR /src
# The build packages alone (no test tools), installed before the sources are
# copied so that the layer is reused across source changes.
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh --build && rm -rf /var/lib/apt/lists/*
# .dockerignore keeps local build trees and .git out. The default build
# compiles the kernels for each x86-64 level and picks the CPU's at start
# (docs/core.md, "SIMD levels"): the image runs at native speed on an AVX2
# laptop and an AVX-512 server alike, and on a baseline VM.
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
      -DKMT_BUILD_TESTS=OFF -DKMT_BUILD_BENCHMARKS=OFF \
 && cmake --build build -j"$(nproc)" --target kmt-server kmt

FROM debian:bookworm-slim
COPY scripts/install-deps.sh /tmp/install-deps.sh
RUN /tmp/install-deps.sh --runtime && rm -rf /var/lib/apt/lists/* /tmp/install-deps.sh \
 && useradd --system --uid 10001 --no-create-home kmt
COPY --from=build /src/build/server/kmt-server /src/build/client/kmt /usr/local/bin/
COPY models/ /models/
USER 10001
EXPOSE 50051 9464
ENTRYPOINT ["/usr/local/bin/kmt-server", "--model_dir=/models", "--listen=0.0.0.0:50051", "--metrics_listen=0.0.0.0:9464"]
