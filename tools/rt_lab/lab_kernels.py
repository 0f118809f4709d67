"""The rt lab's host setup: the Debian packages it needs (installed by the
command that needs them) and the pinned PREEMPT_RT kernels, fetched with a
private apt configuration into a cache and checked by their sha256."""

import hashlib
import os
import shutil
import subprocess
import tempfile

from lab_common import LabError, say

# Pinned kernels: Debian trixie's PREEMPT_RT images on both sides of
# "io_uring/wait: wake real-time waiters from hard interrupt context"
# (stable 6.12.115). expect: the rt-probe verdict the lab requires there.
KERNELS = [
    {
        "version": "6.12.107",
        "package": "linux-image-6.12.107+deb13-rt-amd64",
        "deb_version": "6.12.107-1",
        "sha256": "5553144c94a5687f76f6cc05153cec637fae4c891b05e6d342099ac88714bfd7",
        "expect": "soft",
        "why": "before the 6.12.115 fix: io_uring CQ-wait timeouts are soft "
               "hrtimers (expired by ktimers, SCHED_FIFO 1)",
    },
    {
        "version": "6.12.117",
        "package": "linux-image-6.12.117+deb13-rt-amd64",
        "deb_version": "6.12.117-1",
        "sha256": "f0b20c9cc1c409f781764eae73dcf478982d2af309c6cb8b8feac4fc4967a1e1",
        "expect": "hard",
        "why": "with the 6.12.115 fix: the CQ-wait timer is HRTIMER_MODE_ABS_HARD "
               "for real-time waiters",
    },
]

PACKAGES = ["qemu-system-x86", "busybox-static"]


def ensure_packages(install):
    missing = []
    for p in PACKAGES:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p],
                           capture_output=True, text=True)
        if "install ok installed" not in r.stdout:
            missing.append(p)
    if not missing:
        return
    if not install:
        raise LabError("missing Debian packages: %s (run ./tether rt-lab, which "
                       "installs them, or apt-get install --no-install-recommends "
                       "%s)" % (" ".join(missing), " ".join(missing)))
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    if sudo and not shutil.which("sudo"):
        raise LabError("not root and no sudo: as root run apt-get install -y "
                       "--no-install-recommends " + " ".join(missing))
    say("installing " + " ".join(missing) + " (this command only)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(sudo + ["apt-get", "install", "-y", "-qq",
                           "-o", "DPkg::Lock::Timeout=300",
                           "--no-install-recommends"] + missing,
                   env=env, check=False, stdout=subprocess.DEVNULL)
    still = [p for p in missing if "install ok installed" not in subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True,
        text=True).stdout]
    if still:
        # A fresh machine may have no package lists yet.
        subprocess.run(sudo + ["apt-get", "update", "-qq"], env=env, check=False)
        r = subprocess.run(sudo + ["apt-get", "install", "-y", "-qq",
                                   "-o", "DPkg::Lock::Timeout=300",
                                   "--no-install-recommends"] + still, env=env)
        if r.returncode != 0:
            raise LabError("apt-get install failed for: " + " ".join(still))


def debian_mirror():
    """The system's own Debian archive (deb822 or one-line sources)."""
    try:
        with open("/etc/apt/sources.list.d/debian.sources") as f:
            for line in f:
                if line.startswith("URIs:"):
                    return line.split()[1]
    except OSError:
        pass
    try:
        with open("/etc/apt/sources.list") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1]:
                    return parts[1]
    except OSError:
        pass
    return "http://deb.debian.org/debian"


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_kernel(k, cache):
    """The pinned kernel's bzImage in the cache, fetched with apt if needed."""
    d = os.path.join(cache, k["package"])
    image = os.path.join(d, "vmlinuz")
    stamp = os.path.join(d, "deb.sha256")
    if os.path.exists(image) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read().strip() == k["sha256"]:
                return image
    apt = os.path.join(cache, "apt")
    os.makedirs(os.path.join(apt, "lists", "partial"), exist_ok=True)
    os.makedirs(os.path.join(apt, "cache", "archives", "partial"), exist_ok=True)
    sources = os.path.join(apt, "sources.list")
    with open(sources, "w") as f:
        f.write("deb %s trixie main\n" % debian_mirror())
    opts = ["-o", "Dir::Etc::SourceList=" + sources,
            "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", "Dir::State::Lists=" + os.path.join(apt, "lists"),
            "-o", "Dir::Cache=" + os.path.join(apt, "cache"),
            "-o", "Debug::NoLocking=1", "-q"]
    want = "%s=%s" % (k["package"], k["deb_version"])
    work = tempfile.mkdtemp(prefix="fetch-", dir=cache)
    try:
        for attempt in range(2):
            if attempt == 1 or not os.listdir(os.path.join(apt, "lists")) or \
                    len(os.listdir(os.path.join(apt, "lists"))) <= 1:
                say("apt update of Debian trixie's package lists (private to "
                    "the lab cache, ~10 MB)")
                r = subprocess.run(["apt-get"] + opts + ["update"],
                                   capture_output=True, text=True, timeout=300)
                if r.returncode != 0:
                    raise LabError("apt-get update (trixie lists) failed:\n" +
                                   r.stderr[-2000:])
            say("downloading %s (~110 MB)" % want)
            r = subprocess.run(["apt-get"] + opts + ["download", want], cwd=work,
                               capture_output=True, text=True, timeout=900)
            if r.returncode == 0:
                break
            if attempt == 1:
                raise LabError("apt-get download %s failed (an older ABI can drop "
                               "out of the archive at a point release; pass a "
                               "kernel with --kernel PATH):\n%s"
                               % (want, r.stderr[-2000:]))
        debs = [f for f in os.listdir(work) if f.endswith(".deb")]
        if len(debs) != 1:
            raise LabError("apt-get download left %r in %s" % (debs, work))
        deb = os.path.join(work, debs[0])
        got = sha256(deb)
        if got != k["sha256"]:
            raise LabError("%s has SHA-256 %s, the lab pins %s: refusing it"
                           % (debs[0], got, k["sha256"]))
        extract_image(deb, d)
        with open(stamp, "w") as f:
            f.write(k["sha256"] + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return image


def extract_image(deb, dest):
    """boot/vmlinuz-* and boot/config-* of a linux-image .deb into dest."""
    os.makedirs(dest, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="x-", dir=dest)
    try:
        fsys = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb],
                                stdout=subprocess.PIPE)
        tar = subprocess.run(["tar", "-x", "-C", tmp, "--wildcards",
                              "./boot/vmlinuz-*", "./boot/config-*"],
                             stdin=fsys.stdout, capture_output=True, text=True)
        fsys.stdout.close()
        fsys.wait()
        boot = os.path.join(tmp, "boot")
        images = [f for f in os.listdir(boot)] if os.path.isdir(boot) else []
        vmlinuz = [f for f in images if f.startswith("vmlinuz-")]
        if tar.returncode != 0 or len(vmlinuz) != 1:
            raise LabError("%s holds no boot/vmlinuz-* (%s)" % (deb, tar.stderr))
        shutil.move(os.path.join(boot, vmlinuz[0]), os.path.join(dest, "vmlinuz"))
        for f in images:
            if f.startswith("config-"):
                shutil.move(os.path.join(boot, f), os.path.join(dest, "config"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def resolve_kernels(specs, cache):
    """[(label, image path, expected verdict or None, why)] for --kernel."""
    if not specs:
        specs = [k["version"] for k in KERNELS]
    out = []
    for spec in specs:
        pinned = [k for k in KERNELS if spec in (k["version"], k["package"])]
        if pinned:
            k = pinned[0]
            out.append((k["version"] + "-rt", fetch_kernel(k, cache),
                        k["expect"], k["why"]))
            continue
        if os.path.isfile(spec):
            path = os.path.abspath(spec)
            if path.endswith(".deb"):
                d = os.path.join(cache, "local-" + sha256(path)[:16])
                if not os.path.exists(os.path.join(d, "vmlinuz")):
                    extract_image(path, d)
                path = os.path.join(d, "vmlinuz")
            out.append((os.path.basename(spec), path, None,
                        "a kernel of your own: the probe's verdict is reported, "
                        "not checked"))
            continue
        raise LabError("--kernel %s: neither a pinned version (%s) nor a file "
                       "(a bzImage/vmlinuz, or a linux-image .deb)"
                       % (spec, ", ".join(k["version"] for k in KERNELS)))
    return out
