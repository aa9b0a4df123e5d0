#!/usr/bin/env bash
# Runs the test suite N times in a row while BUSY processes (`while 1: pass`) compete for the cores,
# and reports every failure. This is how we prove the suite does not flake on a loaded machine.
#
#   benchmarks/under_load.sh [RUNS] [PYTEST ARGS...]      e.g. benchmarks/under_load.sh 3
#   make test-under-load RUNS=3                            the same, after building .venv
#   BUSY=2 PY=.venv/bin/python benchmarks/under_load.sh 1 -m "not slow"   the fast subset, once
#
# Logs go to build/under-load/<UTC time>/run-K.log. The busy processes are killed on every exit
# (normal end, failure, Ctrl-C, SIGTERM). Exit status: 0 when every run passed, 1 otherwise.
set -u
cd "$(dirname "$0")/.."

runs=${1:-3}
[ $# -gt 0 ] && shift
case "$runs" in ''|*[!0-9]*) echo "under_load.sh: RUNS must be a number, not '$runs'" >&2; exit 2;; esac
PY=${PY:-.venv/bin/python}
BUSY=${BUSY:-2}
if ! "$PY" -c 'import pytest' 2>/dev/null; then
  echo "under_load.sh: $PY cannot import pytest (run 'make test' once, or set PY=)" >&2
  exit 2
fi
# Was this script started with SIGINT ignored (inherited, so a child sees it too)?
if "$PY" -c 'import signal, sys; sys.exit(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)'; then
  sigint=restore
else
  sigint=inherited-ignore
fi
logdir=build/under-load/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$logdir"

busy_pids=()
test_pid=
cleanup() {
  trap - EXIT INT TERM
  if [ -n "$test_pid" ]; then  # pytest's own Ctrl-C handling stops what the tests started
    if [ "$sigint" = restore ]; then
      kill -INT "$test_pid" 2>/dev/null
      for _ in $(seq 1 60); do kill -0 "$test_pid" 2>/dev/null || break; sleep 1; done
    fi
    kill -TERM "$test_pid" 2>/dev/null
    wait "$test_pid" 2>/dev/null
  fi
  if [ ${#busy_pids[@]} -gt 0 ]; then
    kill "${busy_pids[@]}" 2>/dev/null
    wait "${busy_pids[@]}" 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

for _ in $(seq 1 "$BUSY"); do
  "$PY" -c 'while 1: pass' &
  busy_pids+=($!)
done
echo "under load: $BUSY busy process(es) (pids ${busy_pids[*]}) on $(nproc) core(s); $runs run(s) of: pytest -q $*"
[ "$sigint" = restore ] || echo "under load: started with SIGINT ignored (a background job): the suite runs with SIGINT ignored too"

failed_runs=0
for k in $(seq 1 "$runs"); do
  log=$logdir/run-$k.log
  load_before=$(cut -d' ' -f1-3 /proc/loadavg)
  start=$(date +%s)
  # In the background and waited for, so that a signal to this script is handled at once.
  # A background job of this script starts with SIGINT ignored: give Python its Ctrl-C handler back,
  # unless this script itself was started with SIGINT ignored (a background job of a non-interactive
  # shell): then the suite runs as such a job would, with SIGINT ignored (POSIX), and is stopped by SIGTERM.
  "$PY" -c 'import signal, sys
if sys.argv[1] == "restore": signal.signal(signal.SIGINT, signal.default_int_handler)
import pytest
sys.exit(pytest.main(sys.argv[2:]))' "$sigint" -q -p no:cacheprovider "$@" >"$log" 2>&1 </dev/null &
  test_pid=$!
  wait "$test_pid"
  rc=$?
  test_pid=
  seconds=$(( $(date +%s) - start ))
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
  tail_line=$(grep -E '(passed|failed|error|deselected|no tests ran)' "$log" | tail -n 1)
  echo "run $k/$runs: exit $rc in ${seconds}s (load $load_before -> $load_after): ${tail_line:-no pytest summary}"
  if [ "$rc" -ne 0 ]; then
    failed_runs=$((failed_runs + 1))
    grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/    /'
  fi
done

echo "under load: $failed_runs of $runs run(s) failed; logs in $logdir"
[ "$failed_runs" -eq 0 ]
