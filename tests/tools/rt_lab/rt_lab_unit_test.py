#!/usr/bin/python3
"""The rt lab's host side, without QEMU or a kernel download.

What the guest reports over its serial port is parsed back into steps,
GoogleTest counts and JSON; the judge fails a wrong probe verdict, a
deadline mode that does not follow it, a step that never finished and a
boot that timed out; the initramfs archive is a valid newc cpio with files,
directories and symlinks; unknown kernels and bad flags are refused.

Bazel runs this file directly; it writes its results as JUnit XML to
$XML_OUTPUT_FILE so `./tether test` counts each case.
"""

import copy
import gzip
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

RUNFILES = os.path.join(os.environ.get("TEST_SRCDIR", ""), "tether")
sys.path.insert(0, os.path.join(RUNFILES, "tests/util"))
import pyjunit  # noqa: E402  (the shared JUnit runner)
LAB = os.path.join(RUNFILES, "tools/rt_lab/rt_lab.py")
INIT = os.path.join(RUNFILES, "tools/rt_lab/init.sh")

spec = importlib.util.spec_from_file_location("rt_lab", LAB)
rt_lab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rt_lab)
# Its parts, on the path rt_lab.py put its own folder on.
import lab_common  # noqa: E402
import lab_guest  # noqa: E402
import lab_kernels  # noqa: E402
import lab_results  # noqa: E402

DEADLINES_JSON = (
    '{"deadlines":{"cpu":1,"period_us":500,"rows":['
    '{"key":"ring_wait","label":"r","hard":false,"deadlines":1000,"wakeups":500,'
    '"late_100us":1,"late_300us":1,"missed":500,"p50_us":600,"p99_us":1,"max_us":1},'
    '{"key":"default","label":"d","hard":true,"deadlines":1000,"wakeups":990,'
    '"late_100us":1,"late_300us":1,"missed":10,"p50_us":80,"p99_us":1,"max_us":1},'
    '{"key":"floor","label":"f","hard":true,"deadlines":1000,"wakeups":992,'
    '"late_100us":1,"late_300us":1,"missed":8,"p50_us":80,"p99_us":1,"max_us":1}]}}')
CONTENTION_JSON = (
    '{"contention":{"churners":4,"rows":[{"key":"raw_futex","label":"raw",'
    '"ran":true,"rt_sent":100,"rt_delivered":100,"lost":0,"late_100us":0,'
    '"late_300us":0,"p50_us":1,"p99_us":1,"max_us":1,"send_p50_us":1,'
    '"send_p99_us":1,"send_max_us":1}]}}')


def guest_report(verdict="soft", conformance_failed=0, skip_last_end=False):
    lines = [
        "@@LAB-BEGIN 6.12.107+deb13-rt-amd64",
        "@@FACT uname Linux (none) 6.12.107+deb13-rt-amd64 #1 SMP PREEMPT_RT",
        "@@FACT realtime 1",
        "@@STEP-BEGIN doctor",
        "boot_id=abc",
        "ring_wait=%s" % verdict,
        '@@JSON doctor {"checks":[{"id":"rt_probe","detail":"measured"}]}',
        "@@STEP-END doctor rc=0 start=5.00 end=9.50",
    ]
    for name in ("rt_probe_test", "rt_wake", "uring_loop_wake"):
        lines += ["@@STEP-BEGIN " + name, "[==========] 3 tests ran.",
                  "[  PASSED  ] 3 tests.", "@@STEP-END %s rc=0 start=1 end=2" % name]
    lines += ["@@STEP-BEGIN conformance", "[  PASSED  ] %d tests."
              % (39 - conformance_failed)]
    if conformance_failed:
        lines += ["[  FAILED  ] AllKinds/ConformanceTest.X/UringFutex, where ...",
                  "[  FAILED  ] %d tests, listed below:" % conformance_failed,
                  "[  FAILED  ] AllKinds/ConformanceTest.X/UringFutex"]
    lines += ["@@STEP-END conformance rc=%d start=1 end=3"
              % (1 if conformance_failed else 0)]
    lines += ["@@STEP-BEGIN deadlines", "@@JSON deadlines " + DEADLINES_JSON,
              "@@STEP-END deadlines rc=0 start=1 end=2",
              "@@STEP-BEGIN contention", "@@JSON contention " + CONTENTION_JSON]
    if not skip_last_end:
        lines += ["@@STEP-END contention rc=0 start=1 end=2", "@@LAB-DONE uptime=60"]
    return "\n".join(lines) + "\n"


def judged(text, expect="soft", timed_out=False):
    r = lab_results.parse_results(text)
    r.update(label="k", expect=expect, wall_s=60, timed_out=timed_out,
             console="/nonexistent")
    return {c["name"]: c for c in lab_results.judge(r)}


def read_newc(path):
    """[(name, mode, data)] of a gzip'd newc archive."""
    data = gzip.open(path).read()
    out, pos = [], 0
    while True:
        assert data[pos:pos + 6] == b"070701", data[pos:pos + 6]
        fields = [int(data[pos + 6 + 8 * i:pos + 14 + 8 * i], 16) for i in range(13)]
        mode, size, namesize = fields[1], fields[6], fields[11]
        pos += 110
        name = data[pos:pos + namesize - 1].decode()
        pos += namesize
        pos += (4 - pos % 4) % 4
        body = data[pos:pos + size]
        pos += size
        pos += (4 - pos % 4) % 4
        if name == "TRAILER!!!":
            return out
        out.append((name, mode, body))


class RtLabTest(unittest.TestCase):
    def test_parses_the_guest_report(self):
        r = lab_results.parse_results(guest_report())
        self.assertTrue(r["begun"] and r["done"])
        self.assertEqual(r["facts"]["realtime"], "1")
        self.assertEqual(r["order"][0], "doctor")
        self.assertEqual(r["steps"]["doctor"]["rc"], 0)
        self.assertEqual(r["steps"]["doctor"]["seconds"], 4.5)
        self.assertIn("ring_wait=soft", r["steps"]["doctor"]["log"])
        self.assertEqual(r["steps"]["deadlines"]["json"]["deadlines"]["cpu"], 1)

    def test_counts_googletest_results(self):
        self.assertEqual(lab_results.gtest_counts(
            ["[  PASSED  ] 36 tests.", "[  SKIPPED ] 1 test, listed below:",
             "[  SKIPPED ] A.B", "[  FAILED  ] 2 tests, listed below:",
             "[  FAILED  ] A.C", "[  FAILED  ] A.D"]), (36, 2, 1))
        self.assertEqual(lab_results.gtest_counts(["[  PASSED  ] 1 test."]), (1, 0, 0))
        # --gtest_brief=1: the failed test's own line and no closing list.
        self.assertEqual(lab_results.gtest_counts(
            ["[  FAILED  ] All/T.Talks/FutexWaitv, where GetParam() = 4-byte "
             "object <02-00 00-00> (792 ms)",
             "[==========] 39 tests from 1 test suite ran. (16508 ms total)",
             "[  PASSED  ] 38 tests."]), (38, 1, 0))
        self.assertEqual(lab_results.gtest_failed_names(
            ["[  FAILED  ] A.C (3 ms)", "[  FAILED  ] 1 test, listed below:",
             "[  FAILED  ] A.C"]), ["A.C"])

    def test_a_clean_run_passes_every_check(self):
        checks = judged(guest_report())
        failed = [c for c in checks.values() if not c["ok"]]
        self.assertEqual(failed, [])
        self.assertIn("conformance", checks)

    def test_a_default_that_waits_out_the_burst_fails(self):
        # The soft timer's signature: as many misses as the bound allows, but
        # a median hundreds of microseconds above the floor's.
        slow = guest_report().replace(
            '"missed":10,"p50_us":80', '"missed":10,"p50_us":620')
        checks = judged(slow)
        self.assertFalse(checks["deadlines"]["ok"])
        self.assertIn("median lateness 620 us, floor 80", checks["deadlines"]["detail"])

    def test_a_wrong_probe_verdict_fails(self):
        checks = judged(guest_report(verdict="inconclusive"))
        self.assertFalse(checks["probe"]["ok"])
        self.assertIn("expected soft", checks["probe"]["detail"])

    def test_the_default_mode_must_follow_the_verdict(self):
        # A "hard" verdict means the loop must wait in io_uring; the fixture's
        # default row says hard timer.
        checks = judged(guest_report(verdict="hard"), expect="hard")
        self.assertTrue(checks["probe"]["ok"])
        self.assertFalse(checks["deadlines"]["ok"])
        self.assertIn("io_uring wait expected", checks["deadlines"]["detail"])

    def test_a_failed_test_or_an_unfinished_step_fails(self):
        checks = judged(guest_report(conformance_failed=2))
        self.assertFalse(checks["conformance"]["ok"])
        self.assertIn("2 failed", checks["conformance"]["detail"])
        checks = judged(guest_report(skip_last_end=True))
        self.assertFalse(checks["contention"]["ok"])
        self.assertFalse(checks["boot"]["ok"])

    def test_a_timeout_fails_the_boot(self):
        checks = judged(guest_report(), timed_out=True)
        self.assertFalse(checks["boot"]["ok"])

    def test_a_kernel_of_your_own_reports_any_verdict(self):
        checks = judged(guest_report(verdict="hard"), expect=None)
        self.assertTrue(checks["probe"]["ok"])

    def test_the_initramfs_archive_is_newc(self):
        with tempfile.TemporaryDirectory() as d:
            root = os.path.join(d, "root")
            os.makedirs(os.path.join(root, "lab", "bin"))
            with open(os.path.join(root, "init"), "w") as f:
                f.write("#!/bin/busybox sh\n")
            os.chmod(os.path.join(root, "init"), 0o755)
            os.symlink("busybox", os.path.join(root, "lab", "bin", "sh"))
            lab_guest.cpio_newc(root, os.path.join(d, "initrd.gz"))
            entries = {name: (mode, body) for name, mode, body
                       in read_newc(os.path.join(d, "initrd.gz"))}
        self.assertEqual(entries["init"][1], b"#!/bin/busybox sh\n")
        self.assertEqual(entries["init"][0] & 0o777, 0o755)
        self.assertEqual(entries["lab/bin/sh"][1], b"busybox")
        self.assertEqual(entries["lab/bin/sh"][0] & 0o170000, 0o120000)
        self.assertEqual(entries["lab"][0] & 0o170000, 0o040000)

    def test_unknown_kernels_are_refused(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(lab_common.LabError) as e:
                lab_kernels.resolve_kernels(["9.9.9"], d)
        self.assertIn("6.12.107", str(e.exception))

    def test_the_pinned_kernels_are_an_a_b_pair(self):
        self.assertEqual(sorted(k["expect"] for k in lab_kernels.KERNELS),
                         ["hard", "soft"])
        for k in lab_kernels.KERNELS:
            self.assertEqual(len(k["sha256"]), 64)

    def test_every_guest_step_is_bounded_and_init_powers_off(self):
        for name, secs, cmd in lab_guest.guest_steps(quick=True):
            self.assertGreater(secs, 0)
            self.assertLessEqual(secs, 300)
        init = open(INIT).read()
        self.assertIn("timeout -s KILL", init)
        self.assertIn("poweroff -f", init)

    def test_junit_has_a_case_per_check(self):
        r = lab_results.parse_results(guest_report(verdict="hard"))
        r.update(label="k", expect="soft", wall_s=1, timed_out=False, console="")
        r["checks"] = lab_results.judge(r)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.xml")
            lab_results.write_junit(path, [r])
            text = open(path).read()
        self.assertEqual(text.count("<testcase"), len(r["checks"]))
        self.assertIn('name="k/probe"', text)
        self.assertIn("<failure", text)

    def test_bad_flags_are_refused_before_anything_runs(self):
        bad = subprocess.run([sys.executable, LAB, "--accel", "warp"],
                             capture_output=True, text=True)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--accel", bad.stderr)
        ok = subprocess.run([sys.executable, LAB, "--check-args", "--quick"],
                            capture_output=True, text=True)
        self.assertEqual(ok.returncode, 0, ok.stderr)


if __name__ == "__main__":
    sys.exit(pyjunit.run(RtLabTest))
