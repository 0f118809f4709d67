"""The processes and mounts a bench run owns, and their configurations:
iox-roudi in a private mount namespace, a private roscore, the background
load, the huge-page tmpfs; dies_with_us so none outlives the driver;
sweep_stale for what a killed run left behind."""

import ctypes
import fcntl
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


def claim_run_name():
    """A unique name for this run, "tether-bench-<pid>-<random>", and an
    flock held on /dev/shm/<name>.alive for as long as the run lives (the
    returned fd; the kernel drops it when the process dies, however it
    dies). Every file the run makes is named after it, so another run's
    sweep_stale can tell it is alive: by the lock, also from another pid
    namespace (a container, a Bazel sandbox), where this pid means nothing
    or names another process."""
    for _ in range(100):
        name = f"tether-bench-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            # /dev/shm is world-writable: never follow a planted name.
            fd = os.open(alive_path(name),
                         os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_NOFOLLOW,
                         0o600)
        except FileExistsError:
            continue
        fcntl.flock(fd, fcntl.LOCK_EX)
        return name, fd
    raise RuntimeError("cannot make a unique run name in /dev/shm")


def alive_path(name):
    return f"/dev/shm/{name}.alive"


def run_alive(name):
    """True while the run `name` holds its lock, False once it died (or
    ended), None when it has no lock file (a run of an older build)."""
    try:
        fd = os.open(alive_path(name), os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError:
        return True  # not ours to judge
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def sweep_stale():
    """Removes what a bench killed with SIGKILL (no cleanup ran) left: its
    temporary directory, its shared-memory roots and its lock file, all
    named after its run (claim_run_name)."""
    for pattern in (os.path.join(tempfile.gettempdir(), "tether-bench-*"),
                    "/dev/shm/tether-bench-*"):
        for path in glob.glob(pattern):
            parts = os.path.basename(path).split("-")
            if len(parts) < 4 or not parts[2].isdigit():
                continue
            name = "-".join(parts[:3] + [parts[3].split(".")[0]])
            alive = run_alive(name)
            if alive:
                continue
            if alive is None:
                # No lock: an older build's run, judged by its pid (which
                # only says something in our own pid namespace).
                try:
                    os.kill(int(parts[2]), 0)
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
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except OSError:
                    pass


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
