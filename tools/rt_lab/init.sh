#!/bin/busybox sh
# The rt-lab guest's /init (tools/rt_lab/rt_lab.py builds the initramfs):
# mounts what tether needs, runs the steps of /lab/steps.sh, each bounded by
# a timeout, and reports on the second serial port (ttyS1) between markers
# the host parses; the console (ttyS0) keeps the kernel's messages. Ends
# with a power-off, whatever happens, so QEMU exits.
/bin/busybox mkdir -p /proc /sys /dev /tmp /run /root /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin:/lab/bin
export HOME=/root TEST_TMPDIR=/tmp LD_LIBRARY_PATH=/lib/x86_64-linux-gnu
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /tmp/lab
OUT=/dev/ttyS1
[ -c "$OUT" ] || OUT=/dev/console

report() { echo "$*" > "$OUT"; }

# step NAME SECONDS COMMAND...: runs COMMAND (stdout+stderr to its log), at
# most SECONDS, then sends the log, its exit code and time, and the JSON a
# step wrote to /tmp/lab/NAME.json, if any.
step() {
  name=$1; secs=$2; shift 2
  report "@@STEP-BEGIN $name"
  start=$(cut -d' ' -f1 /proc/uptime)
  timeout -s KILL "$secs" "$@" > "/tmp/lab/$name.log" 2>&1 < /dev/null
  rc=$?
  end=$(cut -d' ' -f1 /proc/uptime)
  cat "/tmp/lab/$name.log" > "$OUT"
  if [ -s "/tmp/lab/$name.json" ]; then
    report "@@JSON $name $(tr -d '\n' < "/tmp/lab/$name.json")"
  fi
  report "@@STEP-END $name rc=$rc start=$start end=$end"
  # A step must leave nothing behind for the next one.
  rm -rf /dev/shm/* 2>/dev/null
}

report "@@LAB-BEGIN $(uname -r)"
report "@@FACT uname $(uname -a)"
report "@@FACT realtime $(cat /sys/kernel/realtime 2>/dev/null || echo 0)"
report "@@FACT cpus $(grep -c ^processor /proc/cpuinfo)"
report "@@FACT boot_id $(cat /proc/sys/kernel/random/boot_id)"
report "@@FACT io_uring_disabled $(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo n/a)"
report "@@FACT sched_rt_runtime_us $(cat /proc/sys/kernel/sched_rt_runtime_us)"
report "@@FACT init_uptime $(cut -d' ' -f1 /proc/uptime)"
. /lab/steps.sh
# Kernel messages that bear on the results (RT throttling, warnings).
dmesg | grep -E 'RT throttling|WARNING:|BUG:|hung_task|rcu.*stall|Oops' | head -20 |
while read -r line; do
  report "@@DMESG $line"
done
report "@@LAB-DONE uptime=$(cut -d' ' -f1 /proc/uptime)"
sync
poweroff -f
