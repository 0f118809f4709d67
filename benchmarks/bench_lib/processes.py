"""The processes and mounts a bench run owns, and their configurations:
iox-roudi in a private mount namespace, a private roscore, the background
load, the huge-page tmpfs; dies_with_us so none outlives the driver;
sweep_stale for what a killed run left behind."""

import ctypes
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xmlrpc.client


class Interrupted(Exception):
    pass


_LIBC = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def dies_with_us(sig):
    """preexec_fn: the child gets `sig` if this driver dies, even by
    SIGKILL (no trap runs then), so nothing it started outlives it."""
    parent = os.getpid()

    def setup():
        _LIBC.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the driver died before prctl
            os.kill(os.getpid(), int(sig))
    return setup


class Processes:
    """The base of Bench (bench_lib.sessions): starting and stopping what a
    run needs. Uses Bench's attributes: tmp, bin, shm_prefix, roudi,
    roscore, ros_env, load, huge_dir."""

    # --- processes we own ---------------------------------------------------

    def log_path(self, name):
        return os.path.join(self.tmp, name)

    def start_roudi(self):
        """iox-roudi in a private mount namespace with its own /tmp, /dev/shm."""
        roudi = shutil.which("iox-roudi")
        if roudi is None:
            return "iox-roudi not found (Debian package `iceoryx`)"
        if not shutil.which("unshare") or not shutil.which("nsenter"):
            return "unshare/nsenter (util-linux) not found"
        config = self.log_path("roudi.toml")
        with open(config, "w") as f:
            f.write(ROUDI_CONFIG)
        log = open(self.log_path("roudi.log"), "w")
        # The config is opened as fd 3 before /tmp is covered by the
        # namespace's own tmpfs (this run's files live in the real /tmp).
        script = (f'exec 3<"{config}" && '
                  "mount -t tmpfs -o size=1536m tether-bench-shm /dev/shm && "
                  "mount -t tmpfs -o size=64m tether-bench-tmp /tmp && "
                  f"exec {roudi} -c /dev/fd/3 -l warning")
        self.roudi = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "--",
             "/bin/sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=dies_with_us(signal.SIGKILL))
        log.close()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.roudi.poll() is not None:
                reason = self.tail(self.log_path("roudi.log"))
                self.roudi = None
                return f"iox-roudi exited: {reason}"
            with open(self.log_path("roudi.log")) as f:
                if "RouDi is ready for clients" in f.read():
                    return None
            time.sleep(0.05)
        self.stop_roudi()
        return "iox-roudi did not get ready in 15 s"

    def stop_roudi(self):
        if self.roudi is None:
            return
        self.stop_process(self.roudi, signal.SIGINT, 8, group=True)
        self.roudi = None

    def start_roscore(self):
        roscore = shutil.which("roscore")
        if roscore is None:
            return "roscore not found (Debian package `ros-core`)"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        home = self.log_path("ros")
        os.makedirs(os.path.join(home, "log"), exist_ok=True)
        self.ros_env = {
            "ROS_MASTER_URI": f"http://127.0.0.1:{port}",
            "ROS_IP": "127.0.0.1",
            "ROS_HOME": home,
            "ROS_LOG_DIR": os.path.join(home, "log"),
        }
        self.ros_env.pop("ROS_HOSTNAME", None)
        env = dict(os.environ)
        env.pop("ROS_HOSTNAME", None)
        env.update(self.ros_env)
        log = open(self.log_path("roscore.log"), "w")
        self.roscore = subprocess.Popen(
            [roscore, "-p", str(port)], env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=dies_with_us(signal.SIGINT))
        log.close()
        master = xmlrpc.client.ServerProxy(self.ros_env["ROS_MASTER_URI"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.roscore.poll() is not None:
                reason = self.tail(self.log_path("roscore.log"))
                self.roscore = None
                return f"roscore exited: {reason}"
            try:
                code, _, _ = master.getSystemState("/tether_bench")
                if code == 1:
                    return None
            except (OSError, xmlrpc.client.Error):
                pass
            time.sleep(0.1)
        self.stop_roscore()
        return "roscore did not answer on its port within 30 s"

    def stop_roscore(self):
        if self.roscore is None:
            return
        # SIGINT to its process group also stops rosmaster and rosout.
        self.stop_process(self.roscore, signal.SIGINT, 10, group=True)
        self.roscore = None

    def start_load(self, cpu):
        self.load = subprocess.Popen(
            [os.path.join(self.bin, "benchmarks/bench_load"), f"--cpu={cpu}"],
            stdin=subprocess.DEVNULL, preexec_fn=dies_with_us(signal.SIGKILL))
        time.sleep(0.2)

    def stop_load(self):
        if self.load is not None:
            self.stop_process(self.load, signal.SIGKILL, 5)
            self.load = None

    @staticmethod
    def stop_process(p, sig, grace, group=False):
        """Signals `p` (its process group if it leads one), then SIGKILL."""
        if p.poll() is not None:
            return
        try:
            if group:
                os.killpg(p.pid, sig)
            else:
                p.send_signal(sig)
            p.wait(timeout=grace)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            pass
        if p.poll() is None:
            try:
                if group:
                    os.killpg(p.pid, signal.SIGKILL)
                else:
                    p.kill()
            except ProcessLookupError:
                pass
            p.wait()

    @staticmethod
    def tail(path, n=3):
        try:
            with open(path, errors="replace") as f:
                lines = [l.strip() for l in f if l.strip()]
            return " | ".join(lines[-n:]) or "(no output)"
        except OSError:
            return "(no log)"

    # --- huge pages ---------------------------------------------------------

    def mount_huge(self):
        """Mounts a tmpfs with transparent huge pages for the "+huge" rows;
        returns None, or why those rows cannot run."""
        if not os.path.exists("/sys/kernel/mm/transparent_hugepage"):
            return "this kernel has no transparent huge pages"
        if os.geteuid() != 0:
            return ("mounting a huge-page tmpfs needs root (run the bench as "
                    "root, or skip these rows with --systems)")
        # A fresh, unguessable folder: /dev/shm is world-writable, and a
        # name known in advance could be a symlink planted by anyone.
        path = tempfile.mkdtemp(prefix=os.path.basename(self.shm_prefix) +
                                "huge-", dir="/dev/shm")
        # Room for the largest session's channels (1 MiB and 4 MiB cases).
        r = subprocess.run(["mount", "-t", "tmpfs", "-o",
                            "huge=within_size,size=512m,mode=0700", "tmpfs",
                            path], capture_output=True, text=True)
        if r.returncode != 0:
            os.rmdir(path)
            return ("mount -t tmpfs -o huge=within_size failed: " +
                    (r.stderr.strip() or f"exit {r.returncode}"))
        self.huge_dir = path
        return None

    def unmount_huge(self):
        if self.huge_dir is None:
            return
        r = subprocess.run(["umount", "-l", self.huge_dir], capture_output=True,
                           text=True)
        if r.returncode != 0:
            self.note(f"could not unmount {self.huge_dir}: "
                      f"{r.stderr.strip() or r.returncode}; run umount -l "
                      f"{self.huge_dir}")
        else:
            shutil.rmtree(self.huge_dir, ignore_errors=True)
        self.huge_dir = None

    def note(self, text):
        print(f"bench: {text}", file=sys.stderr, flush=True)


def sweep_stale():
    """Removes what a bench killed with SIGKILL (no cleanup ran) left: its
    temporary directory and any shared-memory root, named by its pid."""
    for pattern in (os.path.join(tempfile.gettempdir(), "tether-bench-*"),
                    "/dev/shm/tether-bench-*"):
        for path in glob.glob(pattern):
            parts = os.path.basename(path).split("-")
            if len(parts) < 3 or not parts[2].isdigit():
                continue
            pid = int(parts[2])
            try:
                os.kill(pid, 0)
                continue  # still running: not ours to touch
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            if os.path.ismount(path):  # a "+huge" tmpfs: unmount it first
                r = subprocess.run(["umount", "-l", path], capture_output=True,
                                   text=True)
                if r.returncode != 0:
                    print(f"bench: a killed bench left {path} mounted and it "
                          f"cannot be unmounted here ({r.stderr.strip()}): "
                          f"run umount -l {path} as root",
                          file=sys.stderr, flush=True)
                    continue
            shutil.rmtree(path, ignore_errors=True)


def dds_config(domain, shm):
    """Cyclone pinned to lo (never the LAN), unicast discovery, a private
    domain; iceoryx shared memory when `shm`."""
    shm_xml = ("<SharedMemory><Enable>true</Enable><LogLevel>warn</LogLevel>"
               "</SharedMemory>") if shm else ""
    return (f'<CycloneDDS><Domain id="{domain}"><General><Interfaces>'
            '<NetworkInterface name="lo"/></Interfaces>'
            "<AllowMulticast>false</AllowMulticast></General><Discovery>"
            "<ParticipantIndex>auto</ParticipantIndex>"
            "<MaxAutoParticipantIndex>40</MaxAutoParticipantIndex>"
            '<Peers><Peer address="127.0.0.1"/></Peers></Discovery>'
            f"{shm_xml}<Tracing><Verbosity>warning</Verbosity>"
            "<OutputFile>stderr</OutputFile></Tracing></Domain></CycloneDDS>")


# Chunks for every payload (+ iceoryx's and Cyclone's headers), enough for
# both iceoryx and Cyclone's shared memory: publisher history 16, queues.
ROUDI_CONFIG = """[general]
version = 1

[[segment]]

[[segment.mempool]]
size = 128
count = 20000

[[segment.mempool]]
size = 4224
count = 512

[[segment.mempool]]
size = 65664
count = 128

[[segment.mempool]]
size = 1048704
count = 64

[[segment.mempool]]
size = 4194432
count = 64
"""
