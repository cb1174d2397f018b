# kiln — `make demo` and `make test` set up everything on a fresh Debian machine.
PY      ?= python3
BUILD   ?= build
ASAN    ?= build-asan
JOBS    ?= $(shell nproc)
CLANG   ?= clang-19
FUZZ_RUNS    ?= 30000
FUZZ_SECONDS ?= 600
FUZZERS := tensor safetensors archive
FUZZ_ENV := OMP_NUM_THREADS=1 ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PKGS := build-essential cmake ninja-build ccache pkg-config libopenblas-dev libopenblas-openmp-dev liblapacke-dev \
            libsleef-dev libgtest-dev zlib1g-dev nlohmann-json3-dev libfftw3-dev \
            openmpi-bin libopenmpi-dev clang-19 libclang-rt-19-dev libomp-19-dev
PIP_PKGS := torch==2.13.0 numpy pytest pytest-xdist hypothesis nanobind scikit-build-core safetensors onnx onnxruntime mpmath

export PYTHONPATH := $(CURDIR)/python:$(PYTHONPATH)

.PHONY: all deps build test test-cpp test-asan test-asan-python test-guard asan-build fuzz test-python demo demo-cpp tour bench install clean

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

# The C++ tests again under AddressSanitizer + UndefinedBehaviorSanitizer (base ISA only: faster build),
# built with clang so that the same build gives the libFuzzer targets (fuzz/); then a short, seeded run
# of each fuzzer over its seed corpus (FUZZ_RUNS inputs each, tens of seconds in all).
test-asan: asan-build
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 $(ASAN)/kiln_tests --gtest_brief=1
	@for f in $(FUZZERS); do rm -rf $(ASAN)/fuzz-short/$$f && mkdir -p $(ASAN)/fuzz-short/$$f && \
	  echo "fuzz_$$f: $(FUZZ_RUNS) inputs, seed 1" && \
	  $(FUZZ_ENV) $(ASAN)/fuzz_$$f -seed=1 -runs=$(FUZZ_RUNS) -max_len=8192 -rss_limit_mb=4096 \
	    -artifact_prefix=$(ASAN)/fuzz-short/ $(ASAN)/fuzz-short/$$f fuzz/corpus/$$f 2>$(ASAN)/fuzz-short/$$f.log || \
	  { tail -n 60 $(ASAN)/fuzz-short/$$f.log; exit 1; }; tail -n 1 $(ASAN)/fuzz-short/$$f.log; done

asan-build: deps
	@grep -qs 'CMAKE_CXX_COMPILER:.*$(subst clang,clang++,$(CLANG))' $(ASAN)/CMakeCache.txt || rm -rf $(ASAN)
	@cmake -S . -B $(ASAN) -G Ninja -DCMAKE_C_COMPILER=$(CLANG) -DCMAKE_CXX_COMPILER=$(subst clang,clang++,$(CLANG)) \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON -DKILN_ALL_ISAS=OFF -DKILN_FUZZ=ON \
	  -DKILN_PYTHON=ON -DPython_EXECUTABLE=$$(command -v $(PY)) -DKILN_PY_OUTPUT_DIR=$(abspath $(ASAN))/py >/dev/null
	@cmake --build $(ASAN) -j $(JOBS)

# Each fuzzer for FUZZ_SECONDS, growing a local corpus (fuzz/corpus-local, not committed) from the seeds;
# a finding is written to $(ASAN)/fuzz-findings/ and stops the run.
fuzz: asan-build
	@for f in $(FUZZERS); do mkdir -p fuzz/corpus-local/$$f $(ASAN)/fuzz-findings && \
	  echo "fuzz_$$f: $(FUZZ_SECONDS) s" && \
	  $(FUZZ_ENV) $(ASAN)/fuzz_$$f -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -rss_limit_mb=4096 \
	    -print_final_stats=1 -artifact_prefix=$(ASAN)/fuzz-findings/ fuzz/corpus-local/$$f fuzz/corpus/$$f || exit 1; done

# The extension from the sanitizer build, run over the Python tests most likely to crash (abusive
# calls, fuzzed views and archives, checkpoints, interop, the hand-written LAPACK kernels and blocked
# factorizations of test_linalg.py: 35 s) with the ASan runtime preloaded into python, and LLVM's
# OpenMP runtime (clang's, which the extension uses) standing in for libgomp: torch puts its libgomp
# first in the global scope, and OpenBLAS on it would not see kiln's parallel regions, so calls from
# two of kiln's threads at once would both take its threaded path (they crashed now and then). One
# runtime, as in the GCC build.
ASAN_OMP = $(shell $(CLANG) -print-file-name=libomp.so.5)
ASAN_PRELOAD = $(shell $(CLANG) -print-file-name=libclang_rt.asan-x86_64.so):$(ASAN_OMP)
ASAN_PY_TESTS := test_abuse.py test_reliability.py test_fuzz_views.py test_fuzz_archive.py test_safetensors.py \
                 test_tensor_protocol.py test_serialization.py test_streams.py test_graphs.py test_compile.py \
                 test_linalg.py
test-asan-python: asan-build
	@rm -rf $(ASAN)/pkg && mkdir -p $(ASAN)/pkg && cp -rs $(CURDIR)/python/kiln $(ASAN)/pkg/ && \
	  find $(ASAN)/pkg/kiln \( -name '_C*.so' -o -name 'libkiln*' -o -name __pycache__ \) -prune -exec rm -rf {} + && \
	  ln -s $(abspath $(ASAN))/py/* $(ASAN)/pkg/kiln/
	@test -f "$(ASAN_OMP)" || { echo "libomp.so.5 of $(CLANG) not found"; exit 1; }
	LD_PRELOAD=$(ASAN_PRELOAD) PYTHONPATH=$(abspath $(ASAN))/pkg ASAN_OPTIONS=detect_leaks=0 $(PY) -c \
	  "import torch, kiln; r = kiln._C._openmp_runtimes(); assert len(r) == 1, r"
	LD_PRELOAD=$(ASAN_PRELOAD) PYTHONPATH=$(abspath $(ASAN))/pkg \
	  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:handle_segv=0:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1 \
	  OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -q -p no:cacheprovider -n $(JOBS) $(addprefix tests/python/,$(ASAN_PY_TESTS))

# The Python linear-algebra tests with a guard-page malloc preloaded (tests/tools/guard_malloc.c,
# decision 78): each heap block a test allocates ends at an unmapped page, so a read past the end of
# a buffer, by OpenBLAS or LAPACK too (which no sanitizer instruments), faults every time.
GUARD_PY_TESTS := test_linalg.py
test-guard: build
	@gcc -O2 -shared -fPIC -o $(BUILD)/guard_malloc.so tests/tools/guard_malloc.c
	LD_PRELOAD=$(abspath $(BUILD))/guard_malloc.so PYTHONPATH=$(CURDIR)/tests/tools:$$PYTHONPATH OMP_WAIT_POLICY=PASSIVE \
	  $(PY) -m pytest -q -p no:cacheprovider -p guard_malloc_plugin -n $(JOBS) $(addprefix tests/python/,$(GUARD_PY_TESTS))

test-python: build
	OMP_WAIT_POLICY=PASSIVE $(PY) -m pytest -q -n $(JOBS) tests/python

test: test-cpp test-asan test-asan-python test-guard test-python

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
