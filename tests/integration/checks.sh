# Sourced by the shell tests: counted checks, a one-line JSON reader, and the summary that sets the exit status.
#   check NAME COMMAND...   runs COMMAND; a failure is reported and the test goes on
#   json EXPR               evaluates the Python expression EXPR on the JSON document d read from stdin
#   finish                  prints the counts; the test fails when any check did
#   has TEXT FILE           whether FILE holds TEXT
#   cli_work BIN            the account tests' set-up: bin, a work folder removed at exit, its data folder, an empty
#                           CLAUSEQA_CONFIG (no /etc/clauseqa/clauseqa.conf of this machine), cq (clauseqa on that
#                           data) and db SQL (sqlite3 on its database)
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
has() { grep -qF -- "$1" "$2"; }
cli_work() {
  bin=$(realpath "$1")
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  data=$work/data
  export CLAUSEQA_CONFIG=$work/none.conf
  : > "$CLAUSEQA_CONFIG"
}
cq() { "$bin" --data "$data" "$@"; }
db() { sqlite3 "$data/clauseqa.db" "$1"; }
