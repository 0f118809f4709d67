"""The rt lab's guest: the steps it runs (init.sh reads them) and the
initramfs that carries them, busybox-static, tether's binaries and their
shared libraries, written as a newc cpio archive."""

import gzip
import os
import re
import shutil
import stat
import subprocess

from lab_common import LabError

HERE = os.path.dirname(os.path.abspath(__file__))

# The guest's binaries, relative to the Bazel output directory.
BINARIES = {
    "tether": "tools/tether",
    "event_loop_conformance_test": "tests/loop/event_loop_conformance_test",
    "uring_event_loop_test": "tests/loop/uring_event_loop_test",
    "rt_wake_test": "tests/loop/rt_wake_test",
    "rt_probe_test": "tests/loop/rt_probe_test",
    "rt_benchmark": "benchmarks/rt_benchmark",
}

# Under emulation the loops' windows need room (tests/loop conformance).
TIME_SCALE = 10


def guest_steps(quick):
    """The guest's /lab/steps.sh: (name, seconds, command)."""
    q = quick
    steps = [
        ("doctor", 120,
         "sh -c 'tether doctor --rt-probe --json > /tmp/lab/doctor.json; "
         "rc=$?; cat /run/tether/rt-probe; exit $rc'"),
        ("rt_probe_test", 180,
         "sh -c '[ \"$TETHER_LAB_EXPECT\" != none ] && "
         "export TETHER_LAB_EXPECT_RING_WAIT=$TETHER_LAB_EXPECT; "
         "exec rt_probe_test --gtest_brief=1'"),
        ("conformance", 300,
         "env TETHER_TEST_TIME_SCALE=%d event_loop_conformance_test "
         "--gtest_brief=1" % TIME_SCALE),
        ("rt_wake", 300, "env TETHER_REQUIRE_RT=1 rt_wake_test --gtest_brief=1"),
        ("uring_loop_wake", 200,
         "uring_event_loop_test --gtest_brief=1 "
         "--gtest_filter=*PublisherProcessWakesASleepingLoopEveryTime*"),
        ("deadlines", 200,
         "rt_benchmark deadlines %s--json /tmp/lab/deadlines.json"
         % ("--quick " if q else "")),
        ("contention", 300,
         "rt_benchmark contention %s--json /tmp/lab/contention.json"
         % ("--quick " if q else "")),
    ]
    return steps


def ldd_libraries(binary):
    r = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if r.returncode != 0:
        raise LabError("ldd %s failed: %s" % (binary, r.stderr.strip()))
    libs = []
    for line in r.stdout.splitlines():
        m = re.search(r"=>\s+(\S+)\s+\(", line)
        if m:
            libs.append(m.group(1))
        elif "not found" in line:
            raise LabError("%s: %s" % (binary, line.strip()))
        else:
            m = re.match(r"\s*(/\S+)\s+\(", line)
            if m:
                libs.append(m.group(1))  # the loader
    return libs


def cpio_newc(root, out_path):
    """Writes `root` as a gzip'd newc cpio archive (what the kernel unpacks)."""
    ino = [1000]

    def header(name, mode, size, nlink=1, rdev=(0, 0)):
        ino[0] += 1
        fields = [ino[0], mode, 0, 0, nlink, 0, size, 0, 0, rdev[0], rdev[1],
                  len(name) + 1, 0]
        return b"070701" + b"".join(b"%08x" % f for f in fields)

    def pad(n):
        return b"\0" * ((4 - n % 4) % 4)

    with gzip.open(out_path, "wb", compresslevel=6) as out:
        entries = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            rel = os.path.relpath(dirpath, root)
            if rel != ".":
                entries.append(rel)
            for f in sorted(filenames):
                entries.append(os.path.normpath(os.path.join(rel, f)))
        for rel in entries:
            path = os.path.join(root, rel)
            st = os.lstat(path)
            name = rel.encode()
            if stat.S_ISLNK(st.st_mode):
                data = os.readlink(path).encode()
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    data = f.read()
            else:
                data = b""
            h = header(name, st.st_mode, len(data),
                       nlink=2 if stat.S_ISDIR(st.st_mode) else 1)
            out.write(h + name + b"\0" + pad(len(h) + len(name) + 1))
            out.write(data + pad(len(data)))
        t = header(b"TRAILER!!!", 0, 0)
        out.write(t + b"TRAILER!!!\0" + pad(len(t) + 11))


def build_initramfs(bin_dir, work, quick):
    root = os.path.join(work, "root")
    for d in ("bin", "lab/bin", "lib/x86_64-linux-gnu", "lib64"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    busybox = "/bin/busybox"
    if ldd_returns_dynamic(busybox):
        raise LabError("/bin/busybox is not the static one: install busybox-static")
    shutil.copy2(busybox, os.path.join(root, "bin", "busybox"))
    shutil.copy2(os.path.join(HERE, "init.sh"), os.path.join(root, "init"))
    os.chmod(os.path.join(root, "init"), 0o755)
    libs = set()
    for name, rel in BINARIES.items():
        src = os.path.join(bin_dir, rel)
        if not os.path.isfile(src):
            raise LabError("%s is missing: build it first (./tether rt-lab does: "
                           "bazel build //%s:%s)" % (src, os.path.dirname(rel),
                                                     os.path.basename(rel)))
        dst = os.path.join(root, "lab", "bin", name)
        shutil.copyfile(src, dst)
        os.chmod(dst, 0o755)
        libs.update(ldd_libraries(src))
    for lib in sorted(libs):
        real = os.path.realpath(lib)
        base = os.path.basename(lib)
        if base.startswith("ld-linux"):
            shutil.copyfile(real, os.path.join(root, "lib64", base))
            os.chmod(os.path.join(root, "lib64", base), 0o755)
        shutil.copyfile(real, os.path.join(root, "lib", "x86_64-linux-gnu", base))
    with open(os.path.join(root, "lab", "steps.sh"), "w") as f:
        f.write("# generated by tools/rt_lab/rt_lab.py\n")
        for name, secs, cmd in guest_steps(quick):
            f.write("step %s %d %s\n" % (name, secs, cmd))
    out = os.path.join(work, "initrd.gz")
    cpio_newc(root, out)
    return out


def ldd_returns_dynamic(path):
    r = subprocess.run(["ldd", path], capture_output=True, text=True)
    return r.returncode == 0 and "=>" in r.stdout
