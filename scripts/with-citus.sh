#!/usr/bin/env bash
# Run a command with QUIPU_TEST_CITUS_URL set to a real Citus cluster (one coordinator, two
# workers on loopback, Citus 13.2.2 + pgvector 0.8.6 on Debian's PostgreSQL 15) and stop the
# cluster however the command ends. The cluster comes from the shared citus-cluster.sh
# (QUIPU_CITUS_CLUSTER, default /work/shared/citus/citus-cluster.sh), which builds Citus the
# first time (4-7 minutes on 2 cores) and needs root. docs/scale-out.md, "Testing".
#
#   with-citus.sh [--meanwhile 'CMD'] COMMAND...
#
# --meanwhile runs CMD while the cluster is built and started (make test: the venv, lint and
# mypy), then COMMAND once both are done; if CMD fails, the start is stopped and so is this.
# Tests that add nodes (tests/contract/test_citus_growth.py) start them under
# QUIPU_TEST_CITUS_DIR and list them in its `ports` file; every node listed there is stopped here.
# There is no silent skip: without root, apt or the cluster script, this fails and says why.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cluster="${QUIPU_CITUS_CLUSTER:-/work/shared/citus/citus-cluster.sh}"
state="$root/.citus"            # gitignored: the pointer to this run's cluster directory
PGBIN=/usr/lib/postgresql/15/bin
say() { echo "with-citus: $*" >&2; }
die() { say "error: $*"; exit 1; }

# Citus and pgvector are compiled against PostgreSQL 15's server headers. The cluster script
# installs its build dependencies only when PostgreSQL itself is missing, so a machine with the
# server but not the headers (Debian's postgresql-15 without -dev) is completed here first.
built() {
  local lib share
  lib="$("$PGBIN/pg_config" --pkglibdir 2>/dev/null || true)"
  share="$("$PGBIN/pg_config" --sharedir 2>/dev/null || true)"
  [ -n "$lib" ] && [ -f "$lib/citus.so" ] && [ -f "$share/extension/vector--0.8.6.sql" ] \
    && grep -q "default_version = '13.2-1'" "$share/extension/citus.control" 2>/dev/null
}

prerequisites() {
  built && return 0
  local pkgs=(postgresql-15 postgresql-server-dev-15 build-essential flex bison liblz4-dev
    libzstd-dev libssl-dev libkrb5-dev libselinux1-dev libxml2-dev libxslt1-dev libpam0g-dev
    libreadline-dev)
  command -v apt-get >/dev/null || die "Citus is not built and there is no apt-get to build it"
  say "installing PostgreSQL 15 server headers and build tools (${pkgs[*]})"
  mkdir -p /etc/postgresql-common
  [ -f /etc/postgresql-common/createcluster.conf ] \
    || echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2 || die "apt-get update failed: cannot build Citus (is the network up?)"
  apt-get install -y -qq "${pkgs[@]}" >&2 || die "apt-get install failed: cannot build Citus"
}

# Online shard moves and splits (citus_rebalance_start, isolate_tenant_to_new_shard) copy and
# catch up through logical replication, so every node gets what docs/scale-out.md asks of an
# operator: wal_level = logical (needs a restart), and on PostgreSQL releases that vet logical
# decoding plugins (output_plugin_libraries, e.g. 15.20) Citus's own plugin, which tenant
# isolation decodes with. Nodes the tests add get the same lines from DIR/node.conf.
configure_nodes() {  # configure_nodes DIR
  local dir="$1" n
  {
    echo "wal_level = logical"
    if grep -q "output_plugin_libraries" "$("$PGBIN/pg_config" --sharedir)/postgresql.conf.sample"
    then echo "output_plugin_libraries = 'pgoutput, test_decoding, citus'"; fi
  } > "$dir/node.conf"
  for n in $(awk '{print $1}' "$dir/ports"); do
    cat "$dir/node.conf" >> "$dir/$n/postgresql.conf"
    runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/$n" -l "$dir/$n.log" -w -t 60 restart \
      >/dev/null || die "node $n did not restart with wal_level = logical (log: $dir/$n.log)"
  done
}

# The background part of a run: prerequisites, build and start, configure; URL into DIR/url.
if [ "${1:-}" = "--start" ]; then
  dir="${2:?DIR}"
  if built; then
    bash "$cluster" start "$dir" > "$dir/url.tmp"
  else
    # Two runs at once (two checkouts) must not apt-get or `make install` over each other:
    # the first builds, the other waits and finds it built.
    exec 9> /tmp/quipu-citus-build.lock
    flock -w 1800 9 || die "another run has been building Citus for 30 minutes"
    prerequisites
    bash "$cluster" start "$dir" > "$dir/url.tmp"
    exec 9>&-
  fi
  configure_nodes "$dir"
  mv "$dir/url.tmp" "$dir/url"
  exit 0
fi

meanwhile=""
if [ "${1:-}" = "--meanwhile" ]; then meanwhile="${2:?--meanwhile needs a command}"; shift 2; fi
[ "$#" -gt 0 ] || die "usage: with-citus.sh [--meanwhile 'CMD'] COMMAND..."
[ "$(id -u)" = 0 ] || die "the Citus cluster needs root (apt-get, servers run as 'postgres')"
[ -f "$cluster" ] || die "no cluster script at $cluster (set QUIPU_CITUS_CLUSTER)"

stop_cluster() {  # stop_cluster DIR: every node listed in DIR/ports, then remove DIR
  local dir="$1" n
  [ -d "$dir" ] || return 0
  bash "$cluster" stop "$dir" || true
  if [ -f "$dir/ports" ]; then
    for n in $(awk '{print $1}' "$dir/ports"); do
      [ -f "$dir/$n/postmaster.pid" ] \
        && runuser -u postgres -- "$PGBIN/pg_ctl" -D "$dir/$n" -m fast -t 30 stop >/dev/null 2>&1 \
        || true
    done
  fi
  mkdir -p "$state"
  for n in "$dir"/*.log; do [ -f "$n" ] && cp "$n" "$state/" || true; done
  rm -rf "$dir"
}

# A run killed with SIGKILL leaves its cluster behind: stop it before starting a new one.
if [ -f "$state/runtime" ]; then
  old="$(cat "$state/runtime")"
  case "$old" in /tmp/quipu-citus-*) stop_cluster "$old" ;; esac
  rm -f "$state/runtime"
fi

mkdir -p "$state"
# Under /tmp, so the postgres user reaches it wherever the checkout lives (e.g. under /root).
dir="$(mktemp -d /tmp/quipu-citus-XXXXXXXX)"
chmod 755 "$dir"
echo "$dir" > "$state/runtime"
starter=""
cleanup() {
  # a start still running (CMD failed, or we were interrupted): end its session first
  if [ -n "$starter" ] && kill -0 "$starter" 2>/dev/null; then
    kill -- "-$starter" 2>/dev/null || true
    wait "$starter" 2>/dev/null || true
    local i
    for i in $(seq 50); do  # its children (initdb, make) end too before DIR goes
      kill -0 -- "-$starter" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL -- "-$starter" 2>/dev/null || true
  fi
  stop_cluster "$dir"
  rm -f "$state/runtime"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
began=$SECONDS
# In a session of its own (its pid is its process group), so it can be stopped as a whole.
setsid bash "$root/scripts/with-citus.sh" --start "$dir" &
starter=$!
if [ -n "$meanwhile" ]; then
  bash -c "$meanwhile" || die "'$meanwhile' failed"
fi
wait "$starter" || { starter=""; die "the Citus cluster did not start (logs: $dir/*.log)"; }
starter=""
url="$(cat "$dir/url")"
say "cluster up in $((SECONDS - began))s: $url"
QUIPU_TEST_CITUS_URL="$url" QUIPU_TEST_CITUS_DIR="$dir" "$@"
