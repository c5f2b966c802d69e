# kubetrain images, built from source in one multi-stage build:
#   runtime  kubetrain:0.1.0           /usr/local/bin/kubetrain (ENTRYPOINT), its libraries
#                                      (gRPC, OpenBLAS, ...) and Fashion-MNIST
#                                      (/usr/share/datasets/fashion-mnist), so examples/ run as-is
#   operator kubetrain-operator:0.1.0  /usr/local/bin/kubetrain-operator (ENTRYPOINT) and its
#                                      libraries only: no gRPC runtime, OpenBLAS or dataset
# Both run as UID:GID 65532:65532.
#
#   docker build -t kubetrain:0.1.0 .                                  # the runtime (last stage)
#   docker build --target operator -t kubetrain-operator:0.1.0 .
#   docker build --build-arg RUN_TESTS=1 -t kubetrain:0.1.0 .          # also run `make test`
#   make image                                                          # both, docker or podman
# The version is CMakeLists.txt's project VERSION: `make image` passes it as VERSION (the
# packaging tests keep the default below equal to it).
#
# GPU image: a build base with the CUDA toolkit in /usr/local/cuda (the build enables
# KUBETRAIN_WITH_CUDA when it finds it) and a runtime base with the CUDA runtime libraries, both
# Debian bookworm so scripts/setup.sh's packages exist (the CUDA libraries under /usr/local/cuda
# come from the runtime base: scripts/lib-packages.sh lists no package for them):
#   docker build --build-arg BASE_IMAGE=my/bookworm-cuda-devel \
#                --build-arg RUNTIME_IMAGE=my/bookworm-cuda-runtime -t kubetrain:cuda .
ARG BASE_IMAGE=debian:bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG VERSION=0.1.0
# OCI labels: title, description, version. No source or licenses label: the repository has no
# public address or LICENSE file yet; add them here when it does.

# ---- build: what a developer runs, `make build` (and `make test` when RUN_TESTS=1) ----
FROM ${BASE_IMAGE} AS build
ARG RUN_TESTS=0
ARG CMAKE_FLAGS=
ENV DEBIAN_FRONTEND=noninteractive CCACHE_DIR=/root/.cache/ccache
WORKDIR /src
# Packages first, so this layer is reused while only sources change. Without the tests only the
# compile dependencies are installed (no test packages, Node.js or helm).
COPY scripts/setup.sh scripts/setup.sh
COPY tools/node/package.json tools/node/package-lock.json tools/node/
RUN if [ "${RUN_TESTS}" = "1" ]; then bash scripts/setup.sh; else bash scripts/setup.sh --build-only; fi
COPY . .
# ccache lives in a cache mount (BuildKit, buildah): a rebuild after a source change recompiles
# only what changed. Without the tests, the tests and benchmarks are not even compiled.
RUN --mount=type=cache,target=/root/.cache/ccache \
    if [ "${RUN_TESTS}" = "1" ]; then \
      make build CMAKE_FLAGS="${CMAKE_FLAGS}" && make test; \
    else \
      make build SETUP_ARGS=--build-only \
        CMAKE_FLAGS="-DKUBETRAIN_BUILD_TESTS=OFF -DKUBETRAIN_BUILD_BENCH=OFF ${CMAKE_FLAGS}"; \
    fi
# Each image's package list: the Debian packages holding every shared library of its binary.
# scripts/lib-packages.sh fails, naming it, on a library the loader cannot find or that no package
# owns; each image stage checks its binary again with the list it installed.
RUN mkdir -p /out/bin /out/runtime /out/operator \
 && cp build/runtime/kubetrain build/operator/kubetrain-operator /out/bin/ \
 && strip /out/bin/kubetrain /out/bin/kubetrain-operator \
 && cp scripts/lib-packages.sh /out/runtime/ && cp scripts/lib-packages.sh /out/operator/ \
 && scripts/lib-packages.sh /out/bin/kubetrain > /out/runtime/packages.txt \
 && scripts/lib-packages.sh /out/bin/kubetrain-operator > /out/operator/packages.txt \
 && echo "runtime:" $(cat /out/runtime/packages.txt) && echo "operator:" $(cat /out/operator/packages.txt)

# ---- operator: slim, non-root ----
FROM ${RUNTIME_IMAGE} AS operator
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/operator/ /tmp/packages/
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends ca-certificates $(cat /tmp/packages/packages.txt) >/dev/null \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && groupadd --gid 65532 kubetrain \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin kubetrain
COPY --from=build /out/bin/kubetrain-operator /usr/local/bin/kubetrain-operator
RUN bash /tmp/packages/lib-packages.sh --check /tmp/packages/packages.txt /usr/local/bin/kubetrain-operator \
 && rm -rf /tmp/packages
ARG VERSION
LABEL org.opencontainers.image.title="kubetrain-operator" \
      org.opencontainers.image.description="kubetrain operator: runs TrainingJob custom resources as pods and services" \
      org.opencontainers.image.version="${VERSION}"
# Metrics :8080, probes :8081, the admission webhook (HTTPS) :9443.
EXPOSE 8080 8081 9443
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["/usr/local/bin/kubetrain-operator"]

# ---- runtime: slim, non-root; the default target ----
FROM ${RUNTIME_IMAGE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime/ /tmp/packages/
# DROP_PACKAGE (empty: none) leaves one package of the list out: tests/image shows the build then
# fails, naming the library that package holds.
ARG DROP_PACKAGE=
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends ca-certificates dataset-fashion-mnist \
    $(grep -vxF "${DROP_PACKAGE}" /tmp/packages/packages.txt) >/dev/null \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && groupadd --gid 65532 kubetrain \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin kubetrain
COPY --from=build /out/bin/kubetrain /usr/local/bin/kubetrain
RUN bash /tmp/packages/lib-packages.sh --check /tmp/packages/packages.txt /usr/local/bin/kubetrain \
 && rm -rf /tmp/packages
ARG VERSION
LABEL org.opencontainers.image.title="kubetrain" \
      org.opencontainers.image.description="kubetrain runtime: trains a model in a TrainingJob pod (parameter servers, workers, evaluator), with Fashion-MNIST" \
      org.opencontainers.image.version="${VERSION}"
# Replicas :2222 (kubetrain-port), metrics :8090.
EXPOSE 2222 8090
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["/usr/local/bin/kubetrain"]
CMD ["--help"]
