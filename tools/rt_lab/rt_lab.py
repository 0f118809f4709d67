#!/usr/bin/python3
"""./tether rt-lab: tether on real PREEMPT_RT kernels, under QEMU.

Fetches pinned Debian PREEMPT_RT kernel packages into a private cache (apt
with its own lists; the system's package sources are never changed), builds
an initramfs with busybox-static and tether's test and benchmark binaries
(with their shared libraries), boots each kernel with QEMU (KVM where it
works, else TCG software emulation, and says which), runs the lab's steps
in the guest, collects their results over a second serial port, prints a
table per kernel and exits non-zero on any failure. Every step and every
boot is bounded in time; QEMU is killed (by its pid) on a timeout or
Ctrl-C, so nothing is left running.

This file is the command (arguments, QEMU boots, the run); beside it
lab_kernels.py (packages, pinned kernels), lab_guest.py (the guest's steps
and initramfs) and lab_results.py (parsing, judging, reports).

Standard library only (Debian's /usr/bin/python3).
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# The lab's other parts live beside this file (also when a test loads it
# by path).
sys.path.insert(0, HERE)
from lab_common import LabError, say  # noqa: E402
from lab_guest import build_initramfs  # noqa: E402
from lab_kernels import KERNELS, ensure_packages, resolve_kernels  # noqa: E402
from lab_results import judge, parse_results, read_text, report, write_junit  # noqa: E402

# --- booting ---------------------------------------------------------------------------

def choose_accel(requested):
    """('kvm' | 'tcg', why)."""
    if requested == "tcg":
        return "tcg", "TCG (software emulation) as asked"
    why = None
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        why = "no usable /dev/kvm"
    else:
        flags = ""
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("flags"):
                        flags = line
                        break
        except OSError:
            pass
        if not re.search(r"\b(vmx|svm)\b", flags):
            why = ("/dev/kvm exists but this CPU shows no vmx/svm (e.g. PVM, "
                   "which runs only PVM-aware guest kernels: a stock kernel "
                   "crawls and dies there)")
    if why is None:
        return "kvm", "KVM"
    if requested == "kvm":
        raise LabError("--accel kvm: " + why)
    return "tcg", "TCG (software emulation: %s)" % why


def qemu_command(accel, image, initrd, append, console, results):
    cmd = ["qemu-system-x86_64", "-m", "1024", "-smp", "2",
           "-kernel", image, "-initrd", initrd, "-append", append,
           "-display", "none", "-monitor", "none", "-nic", "none",
           "-no-reboot", "-serial", "file:" + console,
           "-serial", "file:" + results]
    if accel == "kvm":
        cmd[1:1] = ["-accel", "kvm", "-cpu", "host,-arch-capabilities"]
    else:
        cmd[1:1] = ["-accel", "tcg", "-cpu", "max"]
    return cmd


RUNNING = []  # QEMU processes of this lab, killed by pid on exit


def kill_running():
    for p in RUNNING:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait()
    RUNNING.clear()


def boot(label, image, initrd, expect, accel, out_dir, timeout, progress=True):
    """Boots one kernel; returns the parsed results (dict)."""
    console = os.path.join(out_dir, label + ".console.log")
    results = os.path.join(out_dir, label + ".results.log")
    for f in (console, results):
        if os.path.exists(f):
            os.remove(f)
    append = "console=ttyS0 quiet panic=-1 TETHER_LAB_EXPECT=%s" % (expect or "none")
    cmd = qemu_command(accel, image, initrd, append, console, results)
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True)
    RUNNING.append(p)
    seen = 0
    timed_out = False
    begin_seen_at = None
    while p.poll() is None:
        time.sleep(0.5)
        elapsed = time.monotonic() - start
        text = read_text(results)
        if begin_seen_at is None and "@@LAB-BEGIN" in text:
            begin_seen_at = elapsed
        if progress:
            # Complete lines only: QEMU may be in the middle of one.
            text = text[:text.rfind("\n") + 1]
            for line in text.splitlines()[seen:]:
                m = re.match(r"@@STEP-END (\S+) rc=(-?\d+)", line)
                if m:
                    say("  %s: %s %s (%.0f s)" % (label, m.group(1),
                                                  "ok" if m.group(2) == "0"
                                                  else "FAILED rc=" + m.group(2),
                                                  elapsed))
            seen = len(text.splitlines())
        if accel == "kvm" and begin_seen_at is None and elapsed > 60:
            timed_out = True  # KVM that never reaches init: fall back
            break
        if elapsed > timeout:
            timed_out = True
            break
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    RUNNING.remove(p)
    qemu_out = p.stdout.read().decode(errors="replace") if p.stdout else ""
    r = parse_results(read_text(results))
    r["label"] = label
    r["expect"] = expect
    r["wall_s"] = round(time.monotonic() - start, 1)
    r["timed_out"] = timed_out
    r["qemu_rc"] = p.returncode
    r["qemu_output"] = qemu_out[-2000:]
    r["console"] = console
    r["results_log"] = results
    r["reached_init"] = begin_seen_at is not None
    return r


# --- main -------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="./tether rt-lab",
        description="tether on real PREEMPT_RT kernels under QEMU: fetches the "
        "pinned Debian kernels (6.12.107-rt: io_uring wait timeouts soft for RT "
        "waiters; 6.12.117-rt: hard), boots each with an initramfs of tether's "
        "tests and benchmarks, runs the rt-probe, the event-loop conformance "
        "suite on every backend, SCHED_FIFO multi-process wake tests and the "
        "deadline and contention benchmarks, and prints a table. Exits 1 on "
        "any failure.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Installs qemu-system-x86 and busybox-static when missing (this "
        "command only). KVM is used where it works, else TCG (slow, and timing "
        "below ~0.5 ms is emulator noise there). A --quick run of both kernels "
        "takes about 2 minutes on 2 idle cores once the kernels are cached "
        "(~220 MB, fetched once), longer when other work loads the host.")
    ap.add_argument("--kernel", action="append", metavar="VERSION|PATH",
                    help="a pinned version (%s) or a bzImage / linux-image .deb "
                    "of your own; repeatable; default: both pinned"
                    % ", ".join(k["version"] for k in KERNELS))
    ap.add_argument("--quick", action="store_true",
                    help="shorter benchmark runs (what ./tether test --all uses)")
    ap.add_argument("--bin-dir", default=os.path.join(os.path.dirname(os.path.dirname(
        HERE)), "bazel-bin"), help="Bazel's output directory with the binaries")
    ap.add_argument("--cache", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
        "tether", "rt-lab"), help="where kernels are kept (default %(default)s)")
    ap.add_argument("--out", help="directory for logs and the report (default: a "
                    "new directory under /tmp, printed at the end)")
    ap.add_argument("--json", metavar="FILE", help="write every result as JSON")
    ap.add_argument("--markdown", metavar="FILE", help="write the report as markdown")
    ap.add_argument("--junit", metavar="FILE", default=os.environ.get("XML_OUTPUT_FILE"),
                    help="write JUnit XML (default $XML_OUTPUT_FILE, for Bazel)")
    ap.add_argument("--accel", choices=["auto", "kvm", "tcg"], default="auto")
    ap.add_argument("--boot-timeout", type=float, default=None,
                    help="seconds per kernel (default 240 quick, 420 full)")
    ap.add_argument("--no-install", action="store_true",
                    help="fail instead of installing missing packages")
    ap.add_argument("--check-args", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    if args.check_args:
        return 0
    command = "./tether rt-lab" + "".join(" " + a for a in argv)
    timeout = args.boot_timeout or (240 if args.quick else 420)
    out_dir = args.out or tempfile.mkdtemp(prefix="tether-rt-lab-")
    os.makedirs(out_dir, exist_ok=True)
    os.makedirs(args.cache, exist_ok=True)
    t0 = time.monotonic()
    try:
        ensure_packages(not args.no_install)
        kernels = resolve_kernels(args.kernel, args.cache)
        say("building the initramfs (busybox-static, tether's tests and "
            "benchmarks with their libraries)")
        initrd = build_initramfs(args.bin_dir, out_dir, args.quick)
        accel, accel_why = choose_accel(args.accel)
        say("QEMU: " + accel_why)
        results = []
        for label, image, expect, why in kernels:
            say("booting %s (%s; expect the probe to say %s), at most %.0f s"
                % (label, why, expect or "anything", timeout))
            r = boot(label, image, initrd, expect, accel, out_dir, timeout)
            if accel == "kvm" and not r["reached_init"]:
                say("KVM did not reach the guest's init: falling back to TCG")
                accel, accel_why = "tcg", "TCG (KVM did not boot a stock kernel)"
                r = boot(label, image, initrd, expect, accel, out_dir, timeout)
            r["checks"] = judge(r)
            results.append(r)
    except LabError as e:
        kill_running()
        say("error: %s" % e)
        return 1
    except KeyboardInterrupt:
        kill_running()
        say("interrupted; QEMU stopped")
        return 130
    finally:
        kill_running()
    text = report(results, accel_why, args.quick, command)
    print(text)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text + "\n")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    slim = []
    for r in results:
        s = {k: v for k, v in r.items() if k not in ("steps",)}
        s["steps"] = {n: {"rc": st["rc"], "seconds": st["seconds"], "json": st["json"]}
                      for n, st in r["steps"].items()}
        slim.append(s)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"accel": accel_why, "quick": args.quick, "kernels": slim}, f,
                      indent=1)
    if args.junit:
        write_junit(args.junit, results)
    failed = [(r["label"], c["name"]) for r in results for c in r["checks"] if not c["ok"]]
    say("logs and report in %s (%.0f s in all)" % (out_dir, time.monotonic() - t0))
    if failed:
        say("FAILED: " + ", ".join("%s %s" % f for f in failed))
        return 1
    say("all checks passed on %d kernel(s)" % len(results))
    return 0


if __name__ == "__main__":
    def on_term(signum, frame):
        kill_running()
        sys.exit(143)
    signal.signal(signal.SIGTERM, on_term)
    sys.exit(main(sys.argv[1:]))
