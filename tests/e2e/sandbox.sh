# sandbox_root BINARY [EXTRA_LIB...]: fills SANDBOX with bwrap arguments for a root holding only the
# loader, glibc, the C++ runtime (libstdc++, libgcc_s), the named extra system libraries and the
# CUDA libraries BINARY and the CUDA plugin beside it are linked with (mounted at /cuda) — the way the lent GPU machine has none of
# our Debian libraries. Run: bwrap "${SANDBOX[@]}" --ro-bind WHAT WHERE ... COMMAND.
sandbox_root() {
  local bin=$1 l soname path
  shift
  SANDBOX=(--tmpfs / --ro-bind /lib64/ld-linux-x86-64.so.2 /lib64/ld-linux-x86-64.so.2)
  for l in libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2 libstdc++.so.6 \
           libgcc_s.so.1 "$@"; do
    SANDBOX+=(--ro-bind "/lib/x86_64-linux-gnu/$l" "/lib/x86_64-linux-gnu/$l")
  done
  # Each CUDA library the loader resolves, by its own file: setup's tools/cuda holds symlinks into
  # the wheels' folders, which a bind of the folder would leave dangling inside the root.
  while read -r soname path; do
    SANDBOX+=(--ro-bind "$(readlink -f "$path")" "/cuda/$soname")
  done < <(for f in "$bin" "$(dirname "$bin")/libanneal_cuda.so"; do [ -f "$f" ] && ldd "$f"; done |
           awk '$1 ~ /^lib(cudart|cublas|cublasLt|nccl|nvJitLink|nvrtc)\.so/ && $3 ~ /^\// && !seen[$1]++ { print $1, $3 }')
  SANDBOX+=(--dev /dev --proc /proc --tmpfs /tmp --chdir /tmp --setenv LD_LIBRARY_PATH /cuda
            --setenv OMP_NUM_THREADS 1 --unshare-net)
}
