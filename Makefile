# anneal — the two commands of the quick start:
#   make run    install what is missing, build, and run the main job on the demo corpus
#   make test   install what is missing, build (release + sanitizers), and run every test tier
#   make install  copy the built anneal (and its CUDA plugin, when built) to PREFIX (default ~/.local/bin)
# Other targets: build, bench, format, clean.
SHELL := /bin/bash
JOBS ?= 2
PRESET ?= release
BUILD := build/$(PRESET)
ANNEAL := $(BUILD)/src/anneal
PREFIX ?= $(HOME)/.local/bin

.PHONY: all setup build build-asan run test bench format clean install

all: build

# Each step's wall time goes to build/step_times.tsv (scripts/timed.sh); `make test` prints it.
setup:
	@bash scripts/timed.sh setup bash scripts/setup.sh

# Reconfigured when setup (re)installs the Python peers and the CUDA toolkit (tools/venv/.anneal-ok), so
# a build configured before the toolkit existed picks it up.
$(BUILD)/build.ninja: CMakeLists.txt CMakePresets.json $(wildcard tools/venv/.anneal-ok)
	@nice cmake --preset $(PRESET) >/dev/null

build: setup $(BUILD)/build.ninja
	@bash scripts/timed.sh build-$(PRESET) nice cmake --build $(BUILD) -j$(JOBS)

# The unit-asan tier runs the unit tests only: the sanitizer build makes their binary (and what it
# links), not the anneal binary, its CLI or the benchmarks (the release build has those).
build-asan: setup
	@[ -f build/asan/build.ninja ] || nice cmake --preset asan >/dev/null
	@bash scripts/timed.sh build-asan nice cmake --build build/asan -j$(JOBS) --target anneal_unit_tests anneal_fuzz_replay

run: build
	@bash scripts/run_demo.sh $(ANNEAL)

test: build build-asan
	@bash scripts/run_tests.sh

# The binary finds the CUDA runtime in this checkout's tools/cuda/lib (its RUNPATH) and the plugin
# beside itself: installed copies keep working while the checkout stays where it is.
install:
	@[ -x $(ANNEAL) ] || { echo "make install: no $(ANNEAL) yet: run make build first" >&2; exit 2; }
	@install -d $(PREFIX)
	@install -m 755 $(ANNEAL) $(PREFIX)/anneal
	@if [ -f $(BUILD)/src/libanneal_cuda.so ]; then install -m 755 $(BUILD)/src/libanneal_cuda.so $(PREFIX)/; fi
	@echo "installed $(PREFIX)/anneal$$(case ":$$PATH:" in *":$(PREFIX):"*) ;; *) echo " ($(PREFIX) is not on PATH: export PATH=$(PREFIX):\$$PATH)";; esac)"

bench: build
	@bash bench/run_all.sh $(ANNEAL)

format:
	@find src tests bench -name '*.cc' -o -name '*.h' | xargs clang-format -i

clean:
	@rm -rf build out
