#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL cluster, then removes the cluster.
#
#   tests/pg/cluster.sh COMMAND [ARG...]
#
# initdb in a new folder under /tmp (UTF-8, C collation, trust authentication for the superuser `clauseqa`), a
# server on a free port of 127.0.0.1 with its unix socket in that folder, fsync off (the data are thrown away).
# COMMAND sees CLAUSEQA_PG (a libpq connection string over the socket) and CLAUSEQA_PG_PORT; its exit status is the
# script's. PostgreSQL refuses to run as root: as root the cluster belongs to `nobody` (through runuser, or setpriv
# where runuser has no PAM set-up), so no user has to be created. The folder is under /tmp, not $TMPDIR, because that user must be able to reach it.
# Without the server binaries (Debian postgresql-15, which tools/setup.sh installs) it says so and exits 77, the
# status ctest reads as "skipped". CLAUSEQA_PG_BIN names another bin folder; CLAUSEQA_PG_SETTINGS adds server
# settings ("-c shared_buffers=512MB" for benchmarks).
set -euo pipefail

bindir=${CLAUSEQA_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)}
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ] || [ ! -x "$bindir/pg_ctl" ]; then
  echo "SKIP: the PostgreSQL server binaries (initdb, pg_ctl) are not installed (Debian postgresql-15; tools/setup.sh" \
       "installs it): the PostgreSQL tests did not run" >&2
  exit 77
fi
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }

dir=$(mktemp -d /tmp/clauseqa-pg.XXXXXX)
as=()
if [ "$(id -u)" = 0 ]; then
  chown nobody "$dir"
  # runuser needs PAM's runuser configuration; setpriv (util-linux too) needs nothing but the capability to switch.
  if runuser -u nobody -- true 2>/dev/null; then
    as=(runuser -u nobody --)
  elif setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups true 2>/dev/null; then
    as=(setpriv --reuid=nobody --regid="$(id -gn nobody)" --clear-groups)
  else
    echo "cluster.sh: running as root and cannot switch to the user nobody (runuser, setpriv), which PostgreSQL" \
         "needs" >&2
    exit 1
  fi
fi
pg() { (cd "$dir" && "${as[@]}" "$@"); } # as the cluster's owner, from a folder it can enter
cleanup() {
  pg "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

if ! pg "$bindir/initdb" -D "$dir/data" -U clauseqa --auth=trust --encoding=UTF8 --locale=C -N >"$dir/initdb.log" 2>&1
then
  cat "$dir/initdb.log" >&2
  exit 1
fi

# A free port: the kernel picks one; another process may take it before the server does, so try a few times.
started=0
for attempt in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # One line: pg_ctl passes -o to the server through a shell, where a newline ends the command (what followed it,
  # CLAUSEQA_PG_SETTINGS included, was silently dropped until 2026-12-01).
  options="-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c synchronous_commit=off"
  options+=" -c full_page_writes=off ${CLAUSEQA_PG_SETTINGS:-}"
  if pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$options" start >/dev/null 2>&1; then
    started=1
    break
  fi
done
if [ "$started" != 1 ]; then
  echo "cluster.sh: the throwaway PostgreSQL server did not start; its log:" >&2
  cat "$dir/server.log" >&2 || true
  exit 1
fi

# CLAUSEQA_PG_CTL: an outage on demand, for the reconnection tests — "$CLAUSEQA_PG_CTL kill9" kills the postmaster
# with SIGKILL (as a crash would; its backends follow) and waits until the server is gone, "$CLAUSEQA_PG_CTL start"
# starts it again on the same port and data.
cat >"$dir/ctl.sh" <<CTL
#!/usr/bin/env bash
set -euo pipefail
as=(${as[*]:-})
pg() { (cd "$dir" && "\${as[@]}" "\$@"); }
case "\${1:-}" in
  kill9)
    pid=\$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
    [ -n "\$pid" ] || exit 0
    kill -9 "\$pid" 2>/dev/null || true
    for _ in \$(seq 1 200); do kill -0 "\$pid" 2>/dev/null || break; sleep 0.05; done ;;
  start)
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      pg "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$options" start >/dev/null 2>&1 && exit 0
      sleep 0.5
    done
    exit 1 ;;
  *) echo "usage: \$0 kill9|start" >&2; exit 2 ;;
esac
CTL
chmod 755 "$dir/ctl.sh"
[ "$(id -u)" = 0 ] && chown nobody "$dir/ctl.sh"

export CLAUSEQA_PG="host=$dir port=$port user=clauseqa dbname=postgres"
export CLAUSEQA_PG_PORT=$port
export CLAUSEQA_PG_CTL="$dir/ctl.sh"
set +e
"$@"
status=$?
set -e
exit $status
