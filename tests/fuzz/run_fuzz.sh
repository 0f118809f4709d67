#!/usr/bin/env bash
# Builds the libFuzzer targets with clang 14 (Bazel --config=fuzz, in an
# output base of its own) and runs them.
#
#   tests/fuzz/run_fuzz.sh TARGET... [--time S] [--smoke]
#   tests/fuzz/run_fuzz.sh --all [--time S] [--smoke]
#   tests/fuzz/run_fuzz.sh --list
#
# Each target starts from tests/fuzz/corpus/<target>/. A normal run merges
# the inputs that found new coverage back into that folder (minimised by
# libFuzzer's -merge=1), and a crash, leak or timeout reproducer is saved
# there as crash-*/leak-*/timeout-*/oom-* (the corpus test then replays it until
# it is fixed). --smoke (what ./tether test runs) fuzzes a scratch copy and
# changes nothing in the checkout. Prints one line per target:
#   fuzz channel_memory: 183422 runs in 60 s, 412 edges, no finding
# and exits non-zero if any target found something.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
all_targets=(channel_memory slot_reader stack_config ros1msg mcap_log net_announce)
time_s=60 smoke=0 targets=() results=""
while [ $# -gt 0 ]; do
  case "$1" in
    --time) time_s="${2:?--time needs seconds}"; shift ;;
    --smoke) smoke=1 ;;
    --all) targets=("${all_targets[@]}") ;;
    --results) results="${2:?--results needs a file}"; shift ;;
    --list) printf '%s\n' "${all_targets[@]}"; exit 0 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run_fuzz: unknown flag $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || { echo "run_fuzz: name a target (--list) or --all" >&2; exit 2; }
for t in "${targets[@]}"; do
  printf '%s\n' "${all_targets[@]}" | grep -qx "$t" \
    || { echo "run_fuzz: no fuzz target '$t'; targets: ${all_targets[*]}" >&2; exit 2; }
done
[[ "$time_s" =~ ^[0-9]+$ ]] && [ "$time_s" -gt 0 ] \
  || { echo "run_fuzz: --time takes whole seconds > 0" >&2; exit 2; }
[ -x /usr/bin/clang-14 ] || { echo "run_fuzz: needs clang 14 (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }

# An output base of its own: the clang build never evicts the g++ one.
base="${TETHER_FUZZ_OUTPUT_BASE:-$HOME/.cache/tether-fuzz-bazel/$(printf '%s' "$root" | md5sum | cut -c1-12)}"
labels=()
for t in "${targets[@]}"; do labels+=("//tests/fuzz:${t}_fuzzer"); done
echo "run_fuzz: building ${targets[*]} with clang 14 (first build: a few minutes)" >&2
blog="$(mktemp)"
# --symlink_prefix=/: no bazel-* links in the checkout (they would point the
# ordinary build's links at this output base, and `bazel test //...` would
# then wander into it).
if ! bazel --output_base="$base" build --config=fuzz --symlink_prefix=/ "${labels[@]}" >"$blog" 2>&1; then
  grep -v 'src/main/tools/linux-sandbox' "$blog" | tail -40 >&2
  echo "run_fuzz: the clang build failed (above)" >&2
  rm -f "$blog"; exit 1
fi
rm -f "$blog"
bin="$(bazel --output_base="$base" info --config=fuzz bazel-bin 2>/dev/null)"
for t in "${targets[@]}"; do
  [ -x "$bin/tests/fuzz/${t}_fuzzer" ] || { echo "run_fuzz: the clang build of $t failed (see above)" >&2; exit 1; }
done

failed=0
# What the fuzzers make (channels, folders: tests/fuzz/fuzz_scratch.h) goes
# into a scratch folder per run, removed when the fuzzer has exited however
# it exited (libFuzzer's exits skip the targets' own clean-up). A SIGTERM,
# SIGINT or SIGHUP to this script stops the running fuzzer first and waits
# for it, so no fuzzer is left running in a folder that was removed under it.
scratch="" fuzzer_pid=""
stop_fuzzer() {
  if [ -n "$fuzzer_pid" ]; then
    kill -TERM "$fuzzer_pid" 2>/dev/null || true
    wait "$fuzzer_pid" 2>/dev/null || true
    fuzzer_pid=""
  fi
}
on_signal() {
  stop_fuzzer
  echo "run_fuzz: stopped by SIG$1; the running fuzzer was stopped first" >&2
  [ -n "$results" ] && [ -n "${t:-}" ] && echo "FAIL fuzz_$t" >>"$results"
  exit "$2"
}
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM
trap 'on_signal HUP 129' HUP
trap 'stop_fuzzer; if [ -n "$scratch" ]; then rm -rf "$scratch"; fi' EXIT
for t in "${targets[@]}"; do
  corpus="$root/tests/fuzz/corpus/$t"
  work="$(mktemp -d)"
  scratch="$(mktemp -d /dev/shm/tether-fuzz-run-XXXXXX)"
  export TETHER_FUZZ_SCRATCH="$scratch"
  mkdir -p "$work/corpus" "$work/findings"
  cp -r "$corpus/." "$work/corpus/" 2>/dev/null || true
  # Reproducers are for the corpus test; fuzzing starts from the rest.
  rm -f "$work/corpus"/crash-* "$work/corpus"/leak-* "$work/corpus"/timeout-* "$work/corpus"/oom-*
  log="$work/log"
  # Inputs up to 4 KiB, except logs: a small tether log with its schemas is
  # 6-8 KiB.
  max_len=4096
  [ "$t" = mcap_log ] && max_len=16384
  set +e
  # In the background, so that this script's traps run while it waits (a
  # foreground child would delay them until it exited); the fuzzer itself
  # is stopped by on_signal.
  (cd "$work" && exec "$bin/tests/fuzz/${t}_fuzzer" -max_total_time="$time_s" \
     -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1 \
     -artifact_prefix="$work/findings/" "$work/corpus" >"$log" 2>&1) &
  fuzzer_pid=$!
  wait "$fuzzer_pid"
  rc=$?
  fuzzer_pid=""
  set -e
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)"
  edges="$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)"
  findings=("$work"/findings/*)
  if [ ! -e "${findings[0]}" ] && { [ "$rc" -eq 130 ] || [ "$rc" -eq 143 ] ||
       { [ "$rc" -eq 72 ] && grep -q 'run interrupted' "$log"; }; }; then
    # Stopped by Ctrl-C or SIGTERM with nothing found (libFuzzer exits 72 on
    # SIGINT): not a finding. A SIGKILL (137: the OOM killer?) is one.
    echo "fuzz $t: interrupted (exit $rc) after $runs runs; no finding"
    rm -rf "$work"
    [ -n "$results" ] && echo "FAIL fuzz_$t" >>"$results"
    exit "$rc"
  fi
  if [ "$rc" -ne 0 ] || [ -e "${findings[0]}" ]; then
    failed=1
    why=""
    [ "$rc" -eq 137 ] && why=" (killed: the OOM killer? see dmesg)"
    echo "fuzz $t: FINDING after $runs runs (exit $rc$why); log tail:"
    grep -E 'ERROR|SUMMARY|==[0-9]+==|runtime error|Test unit written' "$log" | head -12
    if [ "$smoke" -eq 0 ]; then
      for f in "$work"/findings/*; do [ -e "$f" ] && cp "$f" "$corpus/" && echo "  reproducer kept: tests/fuzz/corpus/$t/$(basename "$f")"; done
    else
      for f in "$work"/findings/*; do [ -e "$f" ] && echo "  reproducer: $f (kept in $work)"; done
    fi
    [ -n "$results" ] && echo "FAIL fuzz_$t" >>"$results"
  else
    echo "fuzz $t: $runs runs in $time_s s, $edges edges, no finding"
    [ -n "$results" ] && echo "PASS fuzz_$t" >>"$results"
    if [ "$smoke" -eq 0 ]; then
      # Keep only inputs that add coverage (small corpora in the checkout).
      merged="$work/merged"; mkdir -p "$merged"
      (cd "$work" && "$bin/tests/fuzz/${t}_fuzzer" -merge=1 -max_len="$max_len" "$merged" "$corpus" "$work/corpus" >"$work/merge.log" 2>&1) || true
      if [ -n "$(ls -A "$merged")" ]; then
        find "$corpus" -maxdepth 1 -type f ! -name 'crash-*' ! -name 'leak-*' ! -name 'timeout-*' ! -name 'oom-*' -delete
        cp "$merged"/* "$corpus/"
      fi
      echo "  corpus: $(ls "$corpus" | wc -l) files, $(du -sh "$corpus" | cut -f1) in tests/fuzz/corpus/$t"
    fi
  fi
  rm -rf "$scratch"
  scratch=""
  [ "$failed" -eq 0 ] && rm -rf "$work"
done
exit "$failed"
