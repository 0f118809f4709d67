#!/usr/bin/env bash
# ./tether demo --ros: the demo stack driven by unchanged ROS tools.
#   1. a private roscore on a free port (ROS_HOME in a temp dir);
#   2. the demo stack plus the ROS bridge and the demo's adapter node
#      (ros_bridge/config/ros_demo_stack.json) through `tether launch`;
#   3. `rostopic pub` of a geometry_msgs/Twist on /cmd_vel (drive and turn):
#      the bridge brings it to the controller, which follows it;
#   4. `rostopic echo /robot/pose`: the estimator's pose, out of tether.
# Everything it started is stopped at the end or on Ctrl-C (by pid).
# Called by ./tether (which installed the packages and built the binaries).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
duration=12
speed=0.3
turn=0.5
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration="${2:?--duration needs seconds}"; shift ;;
    --duration=*) duration="${1#--duration=}" ;;
    --speed) speed="${2:?}"; shift ;;
    --turn) turn="${2:?}"; shift ;;
    -h|--help)
      cat <<'USAGE'
usage: ./tether demo --ros [--duration SECONDS] [--speed M_S] [--turn RAD_S]

Starts a private roscore on a free port, the demo control stack with the ROS
bridge (tether launch ros_bridge/config/ros_demo_stack.json), then drives
the robot from ROS with `rostopic pub /cmd_vel geometry_msgs/Twist` (speed
0.3 m/s, turn 0.5 rad/s by default) and shows its pose, published by a
tether node, with `rostopic echo /robot/pose`. Stops everything after
--duration seconds (default 12) or on Ctrl-C.
USAGE
      exit 0 ;;
    *) echo "tether demo --ros: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

say() { printf 'demo --ros: %s\n' "$*" >&2; }
work="$(mktemp -d /tmp/tether-ros-demo.XXXXXX)"
port="$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export ROS_MASTER_URI="http://127.0.0.1:$port" ROS_IP=127.0.0.1
export ROS_HOME="$work/ros" ROS_LOG_DIR="$work/ros/log"
export PATH="/usr/bin:/bin:$PATH"   # ROS's Python tools, not pyenv's python
pids=()
# A fresh tether instance per run, removed at the end (nothing is left in
# /dev/shm, and channels of an older tether build are never in the way).
instance="ros_demo_$$"

cleanup() {
  local p
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$work" "/dev/shm/tether/$instance"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "roscore on port $port (ROS_HOME $ROS_HOME)"
setsid roscore -p "$port" >"$work/roscore.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  timeout 3 rosparam get /run_id >/dev/null 2>&1 && break
  sleep 0.2
done
timeout 3 rosparam get /run_id >/dev/null 2>&1 || { cat "$work/roscore.log" >&2; say "roscore did not start"; exit 1; }

say "launching the demo stack with the ROS bridge"
setsid bazel-bin/tools/tether launch ros_bridge/config/ros_demo_stack.json \
  --instance "$instance" --duration "$((duration + 5))" >"$work/launch.log" 2>&1 &
launcher=$!
pids+=($launcher)
for _ in $(seq 150); do
  timeout 3 rostopic info /cmd_vel 2>/dev/null | grep -q tether_bridge && break
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.2
done
grep -E 'launch:|ros-bridge:|demo_adapter:' "$work/launch.log" | sed 's/^/  /' >&2 || true
if ! kill -0 "$launcher" 2>/dev/null; then
  sed 's/^/  /' "$work/launch.log" >&2
  say "the stack did not start (see above)"
  exit 1
fi

say "ROS: rostopic pub -r 20 /cmd_vel geometry_msgs/Twist '{linear: {x: $speed}, angular: {z: $turn}}'"
setsid rostopic pub -r 20 /cmd_vel geometry_msgs/Twist \
  "{linear: {x: $speed, y: 0.0, z: 0.0}, angular: {x: 0.0, y: 0.0, z: $turn}}" \
  >"$work/pub.log" 2>&1 &
pids+=($!)

say "ROS: rostopic echo /robot/pose (one sample every 2 s)"
end=$((SECONDS + duration))
while [ $SECONDS -lt $end ]; do
  sleep 2
  timeout 5 rostopic echo -n 1 /robot/pose 2>/dev/null \
    | awk '/position:/{p=1} p&&/ x:/{x=$2} p&&/ y:/{y=$2; p=0} /orientation:/{o=1} o&&/ z:/{z=$2} o&&/ w:/{w=$2; o=0}
           END{ if (x != "") printf "  /robot/pose  x %+.3f m  y %+.3f m  heading %+.1f deg\n", x, y, 2*atan2(z,w)*57.29578 }' >&2 \
    || say "no pose yet"
done

say "stopping"
kill -INT "$launcher" 2>/dev/null || true
for _ in $(seq 100); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
grep -E '\[controller\]|\[ros_adapter\]|\[ros_bridge\] ros-bridge: (stopping|master)' "$work/launch.log" | tail -6 | sed 's/^/  /' >&2 || true
