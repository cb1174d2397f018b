# kiln — `make demo` and `make test` set up everything on a fresh Debian machine.
PY      ?= python3
BUILD   ?= build
ASAN    ?= build-asan
JOBS    ?= $(shell nproc)
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS := build-essential cmake ninja-build ccache pkg-config libopenblas-dev libopenblas-openmp-dev liblapacke-dev \
            libsleef-dev libgtest-dev zlib1g-dev nlohmann-json3-dev libfftw3-dev \
            openmpi-bin libopenmpi-dev
PIP_PKGS := torch==2.13.0 numpy pytest pytest-xdist hypothesis nanobind scikit-build-core safetensors onnx onnxruntime mpmath

export PYTHONPATH := $(CURDIR)/python:$(PYTHONPATH)

.PHONY: all deps build test test-cpp test-asan test-python demo demo-cpp tour bench install clean

all: build

# System and Python packages (idempotent: only installs what is missing).
deps:
	@dpkg -s $(APT_PKGS) >/dev/null 2>&1 || \
	  ($(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PKGS))
	@$(PY) -c "import torch, numpy, pytest, xdist, hypothesis, nanobind, safetensors, onnx, onnxruntime, mpmath; assert torch.__version__.startswith('2.13.0')" 2>/dev/null || \
	  $(PY) -m pip install -q $(PIP_PKGS)

build: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DKILN_PYTHON=ON -DPython_EXECUTABLE=$$(command -v $(PY)) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test-cpp: build
	$(BUILD)/kiln_tests --gtest_brief=1

# The C++ tests again under AddressSanitizer + UndefinedBehaviorSanitizer (base ISA only: faster build).
test-asan: deps
	@cmake -S . -B $(ASAN) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON -DKILN_ALL_ISAS=OFF >/dev/null
	@cmake --build $(ASAN) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ASAN)/kiln_tests --gtest_brief=1

test-python: build
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -q -n $(JOBS) tests/python

test: test-cpp test-asan test-python

# The quickstart: trains a character-level transformer LM (~3 minutes on 2 cores), checkpoints, samples.
demo: build
	$(PY) examples/quickstart.py

# The same program written against the C++ API only.
demo-cpp: build
	$(BUILD)/kiln_quickstart

tour: build
	$(PY) examples/tour.py

bench: build
	$(PY) bench/bench.py

install: deps
	$(PY) -m pip install .

clean:
	rm -rf $(BUILD) $(ASAN) python/kiln/_C*.so python/kiln/libkiln*
