# Sourced by the shell tests: counted checks, a one-line JSON reader, and the summary that sets the exit status.
#   check NAME COMMAND...   runs COMMAND; a failure is reported and the test goes on
#   json EXPR               evaluates the Python expression EXPR on the JSON document d read from stdin
#   finish                  prints the counts; the test fails when any check did
pass=0
fail=0
check() { # check NAME COMMAND...
  local name=$1
  shift
  if "$@"; then pass=$((pass + 1)); else echo "FAIL: $name"; fail=$((fail + 1)); fi
}
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
finish() {
  echo "$pass passed, $fail failed"
  test "$fail" = 0
}
