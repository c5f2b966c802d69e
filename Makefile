# kubetrain: the two commands a new user runs are `make run` and `make test`.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
DATA_DIR ?= /usr/share/datasets/fashion-mnist
KUBETRAIN := $(BUILD_DIR)/runtime/kubetrain

.PHONY: all setup configure build run test bench format clean

all: build

setup:
	@bash scripts/setup.sh

configure: setup
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# Trains the mlp on Fashion-MNIST and prints progress and the final test accuracy.
run: build
	$(KUBETRAIN) train --model mlp --data $(DATA_DIR) --epochs 10 --batch-size 64 \
	  --optimizer sgd --lr 0.05 --momentum 0.9 --lr-schedule cosine

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

bench: build
	@$(BUILD_DIR)/bench/kubetrain_bench --benchmark_counters_tabular=true

format:
	@git ls-files '*.cc' '*.h' '*.cu' | xargs clang-format -i

clean:
	@rm -rf $(BUILD_DIR)
