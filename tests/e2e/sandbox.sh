# sandbox_root BINARY [EXTRA_LIB...]: fills SANDBOX with bwrap arguments for a root holding only the
# loader, glibc, the C++ runtime (libstdc++, libgcc_s), the named extra system libraries and the
# CUDA libraries BINARY is linked with (mounted at /cuda) — the way the lent GPU machine has none of
# our Debian libraries. Run: bwrap "${SANDBOX[@]}" --ro-bind WHAT WHERE ... COMMAND.
sandbox_root() {
  local bin=$1 l cuda_dir
  shift
  SANDBOX=(--tmpfs / --ro-bind /lib64/ld-linux-x86-64.so.2 /lib64/ld-linux-x86-64.so.2)
  for l in libc.so.6 libm.so.6 libmvec.so.1 libpthread.so.0 libdl.so.2 librt.so.1 libresolv.so.2 libstdc++.so.6 \
           libgcc_s.so.1 "$@"; do
    SANDBOX+=(--ro-bind "/lib/x86_64-linux-gnu/$l" "/lib/x86_64-linux-gnu/$l")
  done
  cuda_dir=$(dirname "$(ldd "$bin" | awk '$1 ~ /^libcudart/ { print $3 }')" 2>/dev/null)
  [ -n "$cuda_dir" ] && [ "$cuda_dir" != . ] && SANDBOX+=(--ro-bind "$cuda_dir" /cuda)
  SANDBOX+=(--dev /dev --proc /proc --tmpfs /tmp --chdir /tmp --setenv LD_LIBRARY_PATH /cuda
            --setenv OMP_NUM_THREADS 1 --unshare-net)
}
