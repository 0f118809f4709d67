#!/bin/bash
# The quick rt lab on both pinned PREEMPT_RT kernels, from Bazel's runfiles:
# the binaries are the ones this test depends on; the kernels are cached in
# the user's ~/.cache/tether/rt-lab like ./tether rt-lab's; each lab check
# becomes a JUnit case in $XML_OUTPUT_FILE.
set -euo pipefail
runfiles="${TEST_SRCDIR:?}/tether"
home="$(getent passwd "$(id -u)" | cut -d: -f6)"
cache="${TETHER_RT_LAB_CACHE:-${home:-/root}/.cache/tether/rt-lab}"
out="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:?}}/rt-lab"
exec /usr/bin/python3 "$runfiles/tools/rt_lab/rt_lab.py" --quick \
  --bin-dir "$runfiles" --cache "$cache" --out "$out"
