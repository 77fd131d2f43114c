# Golden runs (tests/e2e/golden/runs-VENDOR.txt), sourced by lib.sh: a run's per-step losses (hex floats, as
# logged) and its final state hash, recorded once at a known commit and compared by every later
# commit bit for bit.
#
# The bits are bound to the BLAS build the binary links (OpenBLAS picks its sgemm kernel by CPU; the
# runs pin the kernel, OPENBLAS_CORETYPE, and every thread count, so the file holds on AVX2 and
# AVX-512 machines alike) — the header names that build ("# blas: ..."), and a machine whose BLAS
# differs fails with a message naming both instead of a mismatch of hex floats.
#
# GOLDEN_RECORD=1 records this machine's file instead of comparing, and refuses unless the tree's
# code is clean, the binary was built from HEAD (its --version), and HEAD is the commit the header names (re-recording the same code on another
# machine or library; a maker's first file may be recorded at any clean commit), or
# GOLDEN_MOVE_BITS=1 says a change moves the bits on purpose (its own commit says so, and why).
# The shared fixture checkpoint and sample.txt are re-recorded only with GOLDEN_RECORD_FIXTURE=1.
# The bits also depend on the CPU's maker with the same library, kernel and threads (an AMD EPYC and
# an Intel Xeon differ in the last bits from the first forward on; two AMD EPYCs, with and without
# AVX-512, agree), so each maker has its own file, golden/runs-VENDOR.txt (VENDOR: /proc/cpuinfo's
# vendor_id); the fixture checkpoint and sample.txt are shared (they hold on both).
GOLDEN_VENDOR=$(awk -F': *' '/^vendor_id/ { print $2; exit }' /proc/cpuinfo)
GOLDEN_DIR=$(readlink -f "$(dirname "${BASH_SOURCE[0]}")")/golden
GOLDEN=$GOLDEN_DIR/runs-${GOLDEN_VENDOR:-unknown}.txt
export OPENBLAS_CORETYPE=Haswell

# golden_blas: the BLAS build $ANNEAL links — its Debian package and version, OpenBLAS's own config
# string and the core it runs here (from the library itself, through ctypes, not from anneal).
golden_blas() {
  local lib pkg
  lib=$(ldd "$ANNEAL" | awk '/lib(open)?blas/ {print $3; exit}')
  [ -n "$lib" ] || { echo "none linked"; return; }
  lib=$(readlink -f "$lib")
  pkg=$(dpkg -S "$lib" 2>/dev/null | head -1 | cut -d: -f1)
  /usr/bin/python3 - "$lib" "${pkg:-?}" "$([ -n "$pkg" ] && dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null)" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
def text(fn):
    try:
        f = getattr(lib, fn); f.restype = ctypes.c_char_p; return f().decode().strip()
    except AttributeError:
        return "?"
print(f"{sys.argv[2]} {sys.argv[3] or '?'}; {text('openblas_get_config')}; core {text('openblas_get_corename')}")
PY
}
golden_cpu() {
  echo "$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), flags avx2=$(grep -cm1 avx2 /proc/cpuinfo) avx512f=$(grep -cm1 avx512f /proc/cpuinfo)"
}
golden_header() {  # FIELD: "blas" or "commit" from the header of $GOLDEN (nothing when there is none)
  [ -f "$GOLDEN" ] || return 0
  case $1 in
    blas) sed -nE 's/^# blas: (.*)$/\1/p' "$GOLDEN" | head -1 ;;
    commit) sed -nE 's/^# recorded at commit ([0-9a-f]+) .*/\1/p' "$GOLDEN" | head -1 ;;
  esac
}

# golden_record_guard: exits 2 (nothing written) when GOLDEN_RECORD=1 may not record here.
golden_record_guard() {
  local head want dirty
  head=$(git -C "$GOLDEN_DIR" rev-parse HEAD 2>/dev/null) || { echo "GOLDEN_RECORD=1: not in a git checkout" >&2; exit 2; }
  dirty=$(git -C "$GOLDEN_DIR" status --porcelain --untracked-files=no -- ':/' ':(top,exclude)tests/e2e/golden' | head -3)
  if [ -n "$dirty" ]; then
    echo "GOLDEN_RECORD=1 refused: the tree has uncommitted changes ($(tr '\n' ' ' <<<"$dirty")); golden bits are recorded from committed code only" >&2
    exit 2
  fi
  # The binary must be built from that commit (a checkout not rebuilt would record another's bits).
  local built
  built=$("$ANNEAL" --version 2>/dev/null)
  if [ "$built" = "${built%"(commit $(git -C "$GOLDEN_DIR" rev-parse --short=12 HEAD))"}" ]; then
    echo "GOLDEN_RECORD=1 refused: $ANNEAL is '$built', not built from HEAD ($(git -C "$GOLDEN_DIR" rev-parse --short=12 HEAD)) with a clean tree: rebuild it first" >&2
    exit 2
  fi
  want=$(golden_header commit)
  if [ "${GOLDEN_MOVE_BITS:-0}" != 1 ] && [ -n "$want" ] && [ "$(git -C "$GOLDEN_DIR" rev-parse "$want" 2>/dev/null)" != "$head" ]; then
    echo "GOLDEN_RECORD=1 refused: HEAD is $(git -C "$GOLDEN_DIR" rev-parse --short HEAD), the golden runs were recorded at $want." >&2
    echo "  To re-record the same code on this machine, check out $want (git worktree add), record there, and copy tests/e2e/golden/ back." >&2
    echo "  For a change that moves the bits on purpose, GOLDEN_MOVE_BITS=1 GOLDEN_RECORD=1, in a commit of its own that says why." >&2
    exit 2
  fi
}
golden_write_header() {
  { echo "# golden runs of the CPU engine (tests/e2e/golden_test.sh, dist3d_grid_test.sh): NAME losses=STEP:HEX,... hash=XXH64"
    echo "# recorded at commit $(git rev-parse --short HEAD 2>/dev/null) on $(date -u +%F) with OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE,"
    echo "# thread counts pinned per run; cpu: $(golden_cpu)"
    echo "# blas: $(golden_blas)"
  } >"$GOLDEN"
}

golden_line() {  # NAME LOG -> "NAME losses=l1,l2,... hash=H"
  local l h
  l=$(grep -E '^(\[[^]]*\] )?step +[0-9]+/' "$2" | sed -E 's/.*step +([0-9]+)\/.*\((0x[^)]*)\).*/\1:\2/' | sort -n -u | paste -sd, -)
  h=$(sed -nE 's/.*state hash.*: ([0-9a-f]+)$/\1/p' "$2" | tail -1)
  echo "$1 losses=${l:-none} hash=${h:-none}"
}
GOLDEN_BLAS_HERE=
golden_check() {  # NAME LOG
  local got want rec
  got=$(golden_line "$1" "$2")
  if [ "${GOLDEN_RECORD:-0}" = 1 ]; then
    [ -n "${GOLDEN_GUARDED:-}" ] || { golden_record_guard; GOLDEN_GUARDED=1; }
    { [ -f "$GOLDEN" ] && awk -v n="$1" '$1 != n' "$GOLDEN"; } >"$GOLDEN.tmp"; echo "$got" >>"$GOLDEN.tmp"; mv "$GOLDEN.tmp" "$GOLDEN"
    ok "golden $1 recorded"; return
  fi
  if [ ! -f "$GOLDEN" ]; then
    bad "golden $1: no golden runs for this CPU's maker ($GOLDEN_VENDOR): $GOLDEN is missing (recorded: $(cd "$GOLDEN_DIR" && ls runs-*.txt | tr '\n' ' ')); record one at a clean commit with GOLDEN_RECORD=1 (tests/e2e/golden_lib.sh)"
    return 1
  fi
  [ -n "$GOLDEN_BLAS_HERE" ] || GOLDEN_BLAS_HERE=$(golden_blas)
  rec=$(golden_header blas)
  if [ "$rec" != "$GOLDEN_BLAS_HERE" ]; then
    bad "golden $1: the golden runs are bound to the BLAS build they were recorded with, '${rec:-(none named in $GOLDEN)}'; this binary links '$GOLDEN_BLAS_HERE'. Run where that build is installed, or re-record at $(golden_header commit) (tests/e2e/golden_lib.sh)"
    return 1
  fi
  want=$(awk -v n="$1" '$1 == n' "$GOLDEN" | head -1)
  if [ -z "$want" ]; then bad "golden $1: no recorded line in $GOLDEN"
  elif [ "$got" = "$want" ]; then ok "golden $1 identical (${got##* })"
  else bad "golden $1 differs (same BLAS build; recorded on: $(sed -nE 's/.*; cpu: //p' "$GOLDEN"), here: $(golden_cpu)): got '$got', want '$want'"; fi
}
