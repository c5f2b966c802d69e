# kubetrain: the two commands a new user runs are `make run` and `make test`.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
SETUP_ARGS ?=
KUBETRAIN := $(BUILD_DIR)/runtime/kubetrain

.PHONY: all setup configure build install run test bench image format clean

all: build

setup:
	@bash scripts/setup.sh $(SETUP_ARGS)

CONFIGURE = cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

configure: setup
	@$(CONFIGURE)

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Installs kubetrain, kubetrain-operator and kubectl-kubetrain (the kubectl plugin:
# `kubectl kubetrain ...`) into $(PREFIX)/bin; DESTDIR works as usual.
PREFIX ?= /usr/local
install: build
	@cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# A real distributed job on this machine: 1 parameter server + 2 workers train
# the mlp on Fashion-MNIST; the last line states the test accuracy. It builds
# only the `kubetrain` binary it runs (the test suite is `make test`'s) and
# installs no packaging-test tools (Node.js modules, helm), saying each step.
run:
	@echo "make run: checking the Debian packages (scripts/setup.sh --debian-only)"
	@bash scripts/setup.sh --debian-only
	@echo "make run: configuring $(BUILD_DIR)/ ($(BUILD_TYPE))"
	@$(CONFIGURE)
	@echo "make run: building $(KUBETRAIN) with $(JOBS) jobs (not the tests: make test builds those)"
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target kubetrain
	@echo "make run: kubetrain run examples/fmnist-ps-sync.yaml (1 PS + 2 workers, 13-20 s on 2 cores)"
	$(KUBETRAIN) run examples/fmnist-ps-sync.yaml

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

bench: build
	@$(BUILD_DIR)/bench/kubetrain_bench --benchmark_counters_tabular=true
	@$(BUILD_DIR)/bench/kubetrain_ps_bench
	@$(BUILD_DIR)/bench/kubetrain_allreduce_bench
	@$(BUILD_DIR)/bench/kubetrain_metrics_bench --benchmark_counters_tabular=true
	@# These two run against the API emulator, built with the tests.
	@if [ -x $(BUILD_DIR)/bench/kubetrain_informer_bench ]; then \
	  $(BUILD_DIR)/bench/kubetrain_informer_bench && \
	  $(BUILD_DIR)/bench/kubetrain_operator_bench \
	    --operator-binary=$(BUILD_DIR)/operator/kubetrain-operator; \
	else echo "informer/operator benchmarks skipped: build with KUBETRAIN_BUILD_TESTS=ON"; fi

# The images kubetrain:<version> (runtime) and kubetrain-operator:<version>, built from the
# Dockerfile with docker when its daemon answers, else podman (scripts/image.sh says how);
# the version is CMakeLists.txt's. IMAGE_ARGS go to each build, e.g. --build-arg RUN_TESTS=1.
IMAGE_ARGS ?=
image:
	@bash scripts/image.sh $(IMAGE_ARGS)

format:
	@git ls-files '*.cc' '*.h' '*.cu' | xargs clang-format -i

clean:
	@rm -rf $(BUILD_DIR)
