# import_host_image NAME [--python IMPORTS] PROGRAM...: a container image made from this host's own
# files and imported from a local tar (nothing pulled; nodes may have no registry): the programs and
# the libraries they load (ldd); with --python, also /usr/bin/python3, its standard library and the
# packages and shared libraries that `import IMPORTS` loads. Used by e2e.job_sandbox, peers.ddp_torch
# and bench/job_latency for their image: jobs. Needs podman (scripts/setup.sh installs it) and $TMP.
# shellcheck shell=bash
import_host_image() {
  local name=$1 root=$TMP/image-root f d files=() py=""
  shift
  if [ "${1:-}" = --python ]; then py=$2; shift 2; fi
  rm -rf "$root"; mkdir -p "$root/tmp"
  files=("$@")
  if [ -n "$py" ]; then
    # What the imports load: whole top-level packages (their data files too), stdlib, mapped .so files.
    mapfile -t -O ${#files[@]} files < <(/usr/bin/python3 - "$py" <<'PY'
import os, sys, sysconfig
exec(sys.argv[1])
out = {"/usr/bin/python3", os.path.realpath(sys.executable)}
stdlib = sysconfig.get_paths()["stdlib"]
for top in {m.split(".")[0] for m in list(sys.modules)}:
    mod = sys.modules.get(top)
    p = getattr(mod, "__file__", None) or ""
    if not p or p.startswith(stdlib + "/"):
        continue
    out.add(os.path.dirname(p) if os.path.basename(p) == "__init__.py" else p)
for line in open("/proc/self/maps"):
    parts = line.split()
    if len(parts) >= 6 and ".so" in parts[5]:
        out.add(parts[5])
        d = os.path.dirname(parts[5])  # and the names it is loaded by (libx.so.1 -> libx.so.1.2.3)
        for e in os.scandir(d):
            if e.is_symlink() and os.path.realpath(e.path) == parts[5]:
                out.add(e.path)
print("\n".join(sorted(out)))
print(stdlib)
PY
)
  fi
  # Each file at its real folder under its own name (merged /usr: /bin, /lib and /lib64 are links).
  for f in "${files[@]}" $(ldd "${files[@]}" 2>/dev/null | awk '$3 ~ /^\// { print $3 }' | sort -u) /lib64/ld-linux-x86-64.so.2; do
    [ -e "$f" ] || continue
    d=$(readlink -f "$(dirname "$f")")
    mkdir -p "$root$d"
    if [ -d "$f" ] && [ ! -L "$f" ]; then
      cp -a "$f" "$root$d/" 2>/dev/null
    elif [ -L "$f" ] && [[ $(readlink "$f") != /* ]] && [ "$(dirname "$(readlink "$f")")" = . ]; then
      cp -a "$f" "$root$d/"  # a link beside its target (sh -> dash): both kept, the data once
      t=$(readlink -f "$f"); mkdir -p "$root$(dirname "$t")"; [ -e "$root$t" ] || cp "$t" "$root$t"
    else
      cp -L "$f" "$root$d/$(basename "$f")"
    fi
  done
  for d in bin lib lib64 sbin; do [ -L "/$d" ] && [ ! -e "$root/$d" ] && ln -s "$(readlink "/$d")" "$root/$d"; done
  rm -rf "$root"/usr/lib/python3*/test "$root"/usr/lib/python3*/idlelib "$root"/usr/lib/python3*/tkinter
  tar -C "$root" -cf "$TMP/image.tar" .
  podman import "$TMP/image.tar" "$name" >/dev/null
}
