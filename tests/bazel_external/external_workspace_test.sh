#!/usr/bin/env bash
# A robot team's own Bazel workspace that depends on tether through
# local_repository: it compiles its own schema with tether's
# capnp_cc_library rule and builds and runs a node against tether's public
# targets. Runs a nested Bazel (batch mode, private output base): minutes.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# The tether checkout: the real path behind the runfiles' WORKSPACE.
tether="$(dirname "$(readlink -f "${TEST_SRCDIR:-$here/..}/tether/WORKSPACE")")"
template="$tether/tests/bazel_external/workspace"
work="$(mktemp -d "${TEST_TMPDIR:-/tmp}/tether-external.XXXXXX")"
shm_root="/dev/shm/tether-external-$$-$RANDOM"
cleanup() {
  rm -rf "$work" "$shm_root"
}
trap cleanup EXIT

mkdir -p "$work/ws"
sed "s|@TETHER@|$tether|g" "$template/WORKSPACE.template" >"$work/ws/WORKSPACE"
cp "$template/bazelrc.template" "$work/ws/.bazelrc"
cp "$template/BUILD.template" "$work/ws/BUILD.bazel"
cp "$template/ping.capnp" "$template/node.cc" "$work/ws/"

cd "$work/ws"
if ! bazel --batch --output_base="$work/output_base" build //:node \
    --noshow_progress 2>"$work/build.log"; then
  grep -v 'linux-sandbox' "$work/build.log" | tail -40
  echo "FAIL: the external workspace does not build against tether"
  exit 1
fi
# The backend the kernel offers, then the fallback chosen by the
# application itself (//loop:wake_port, //loop:kernel_probe).
out="$(./bazel-bin/node "$shm_root")"
echo "$out"
case "$out" in
  "ok 42 "*) ;;
  *) echo "FAIL: expected 'ok 42 <backend>'"; exit 1 ;;
esac
out="$(./bazel-bin/node "$shm_root" futex_waitv)"
echo "$out"
[ "$out" = "ok 42 futex_waitv" ] || {
  echo "FAIL: expected 'ok 42 futex_waitv'"; exit 1; }
echo "PASS: an external workspace built and ran a node on tether"
