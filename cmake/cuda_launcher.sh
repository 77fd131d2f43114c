#!/bin/bash
# The CUDA compiler launcher (CMAKE_CUDA_COMPILER_LAUNCHER): runs the compile (through ccache when
# given) and saves what it printed — ptxas's -v report of registers, spills, stack frame and shared
# memory per kernel — as REPORT_DIR/<object name>.txt, printing it too.
#   cuda_launcher.sh REPORT_DIR [ccache] nvcc ARGS...
dir=$1
shift
mkdir -p "$dir"
obj=unknown
prev=
for a in "$@"; do
  [ "$prev" = "-o" ] && obj=$(basename "$a")
  prev=$a
done
"$@" 2>"$dir/$obj.txt"
rc=$?
cat "$dir/$obj.txt" >&2
exit $rc
