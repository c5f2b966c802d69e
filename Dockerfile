# syntax=docker/dockerfile:1
# kubetrain: one image with both binaries.
#   /usr/local/bin/kubetrain           the runtime (ENTRYPOINT): `kubetrain train ...` in a pod
#   /usr/local/bin/kubetrain-operator  the operator (the Helm chart sets it as the command)
# Fashion-MNIST is included (/usr/share/datasets/fashion-mnist), so examples/ run as-is.
#
#   docker build -t kubetrain:0.1.0 .
#   docker build --build-arg RUN_TESTS=0 -t kubetrain:dev .        # skip `make test`
# GPU image: a build base with the CUDA toolkit in /usr/local/cuda (the build
# enables KUBETRAIN_WITH_CUDA when it finds it) and a runtime base with the CUDA
# runtime libraries, both Debian bookworm so scripts/setup.sh's packages exist:
#   docker build --build-arg BASE_IMAGE=my/bookworm-cuda-devel \
#                --build-arg RUNTIME_IMAGE=my/bookworm-cuda-runtime -t kubetrain:cuda .
ARG BASE_IMAGE=debian:bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

# ---- build: exactly what a developer and CI run ----
FROM ${BASE_IMAGE} AS build
ARG RUN_TESTS=1
ARG CMAKE_FLAGS=
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src
# Packages and tools first, so this layer is reused while only sources change.
COPY scripts/setup.sh scripts/setup.sh
COPY tools/node/package.json tools/node/package-lock.json tools/node/
RUN bash scripts/setup.sh
COPY . .
RUN make build CMAKE_FLAGS="${CMAKE_FLAGS}"
RUN if [ "${RUN_TESTS}" = "1" ]; then make test; fi
# The Debian packages that hold the binaries' shared libraries: the runtime
# stage installs exactly these.
RUN mkdir -p /out/bin \
 && cp build/runtime/kubetrain build/operator/kubetrain-operator /out/bin/ \
 && strip /out/bin/kubetrain /out/bin/kubetrain-operator \
 && ldd /out/bin/kubetrain /out/bin/kubetrain-operator \
    | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u \
    | xargs -r dpkg -S 2>/dev/null | cut -d: -f1 | sort -u > /out/runtime-packages.txt \
 && cat /out/runtime-packages.txt

# ---- runtime: slim, non-root ----
FROM ${RUNTIME_IMAGE} AS runtime
ENV DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends ca-certificates dataset-fashion-mnist \
    $(cat /tmp/runtime-packages.txt) \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
 && groupadd --gid 65532 kubetrain \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin kubetrain
COPY --from=build /out/bin/kubetrain /usr/local/bin/kubetrain
COPY --from=build /out/bin/kubetrain-operator /usr/local/bin/kubetrain-operator
# Runtime :8090 (metrics), replicas :2222 (kubetrain-port); operator :8080, :8081.
EXPOSE 2222 8090
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["/usr/local/bin/kubetrain"]
CMD ["--help"]
