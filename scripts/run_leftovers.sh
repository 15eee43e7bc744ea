# Sourced by scripts/test.sh (and by tests/test_run_leftovers.py): ending what a test run started
# when the run is interrupted (Ctrl-C, SIGTERM) or a step fails.
#
# test.sh runs every pytest with two environment variables, which the brokers and other
# processes the tests start inherit:
#   AMQSTOMP_TEST_RUN=MARK   MARK is the run's work directory: unique to the run
#   TMPDIR=DIR               the run's own temporary directory: ActiveMQ brokers' directories
#                            (amqstomp-broker-*), master/slave stores and RabbitMQ cluster nodes
#                            go there instead of /tmp
# The brokers run in sessions of their own (amqstomp/testing/broker.py), so neither Ctrl-C nor a
# signal to test.sh's process group reaches them, and a pytest ended by SIGTERM or SIGKILL tears
# nothing down. The mark finds them, and only them: a broker another run or session started
# carries another mark or none, and its directory is not under DIR.

# run_pids MARK: the ids (one a line) of the live processes whose environment holds
# AMQSTOMP_TEST_RUN=MARK, except this shell and epmd (Erlang's port mapper: one per machine,
# serving every RabbitMQ node there, whichever run started it).
run_pids() {
  local file pid comm
  grep -lsxzF "AMQSTOMP_TEST_RUN=$1" /proc/[0-9]*/environ 2>/dev/null | while IFS= read -r file; do
    pid=${file#/proc/} && pid=${pid%/environ}
    if [ "$pid" = "$$" ] || [ "$pid" = "$BASHPID" ]; then continue; fi
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || continue
    [ "$comm" = epmd ] || echo "$pid"
  done
  return 0
}

# end_run MARK DIR: end the processes run_pids MARK lists (SIGCONT first, for a broker a test
# suspended, then SIGTERM; SIGKILL for those left after END_RUN_GRACE seconds, default 20: an
# ActiveMQ stopping closes its store), then delete DIR's amqstomp-* entries (the brokers'
# directories). Says on stderr what it ended. Never fails.
end_run() {
  local mark=$1 dir=$2 grace=${END_RUN_GRACE:-20} pids tenths=0 p names=""
  pids=$(run_pids "$mark")
  if [ -n "$pids" ]; then
    for p in $pids; do names+=" $p:$(cat "/proc/$p/comm" 2>/dev/null || echo gone)"; done
    echo "test.sh: ending the processes this run started (pid:name):$names" >&2
    # shellcheck disable=SC2086  # one argument per pid
    kill -CONT $pids 2>/dev/null || true
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    while pids=$(run_pids "$mark") && [ -n "$pids" ] && [ "$tenths" -lt $((grace * 10)) ]; do
      sleep 0.1
      tenths=$((tenths + 1))
    done
    if [ -n "$pids" ]; then
      echo "test.sh: still running after ${grace} s, killed (SIGKILL):" $pids >&2
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      tenths=0
      while [ -n "$(run_pids "$mark")" ] && [ "$tenths" -lt 50 ]; do sleep 0.1; tenths=$((tenths + 1)); done
    fi
  fi
  if [ -n "$dir" ] && [ -d "$dir" ]; then rm -rf "$dir"/amqstomp-* 2>/dev/null || true; fi
  return 0
}
