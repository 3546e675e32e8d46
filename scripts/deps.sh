#!/usr/bin/env bash
# Installs what `make run` and `make test` need when it is missing and the
# machine allows (root with apt-get): the MariaDB server and client from
# Debian's packages, and for the client-compatibility matrix (tests/matrix_test.go)
# PHP with PDO MySQL and mysqli, PyMySQL, MySQLdb (mysqlclient, on MariaDB
# Connector/C), sysbench, Node.js with npm, and the
# Node package of tests/testdata/clients/node (mysql2, pinned by its lock file),
# promtool (Debian's prometheus package) for the alert rules, Chromium for the
# status page's browser test (tests/web), podman with runc for the image's
# test (deploy/image), systemd-analyze (package systemd) for the Debian
# package's test, and etcd (Debian's etcd-server) for the fleet's tests, which
# start their own etcd cluster (sandbox.StartEtcd; the package's own service
# is kept from starting like MariaDB's).
# The bench mode (for `make bench`) adds sysbench and HAProxy to the server
# packages.
# It is quiet and does nothing when everything is there.
# usage: scripts/deps.sh [server|test|bench]
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-server}
case $what in server | test | bench) ;; *)
  echo "usage: scripts/deps.sh [server|test|bench]" >&2
  exit 2
  ;;
esac

need=()
have_server() { command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || command -v mysqld >/dev/null || [ -x /usr/sbin/mysqld ]; }
# PyMySQL and MySQLdb from Debian land in the system Python, which may not be
# the first python3 on PATH (pyenv and the like); the tests look in both.
have_python_module() {
  local py
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null && "$py" -c "import $1" >/dev/null 2>&1 && return 0
  done
  return 1
}
have_php_ext() { php -r 'exit(extension_loaded($argv[1]) ? 0 : 1);' "$1" >/dev/null 2>&1; }

have_server || need+=(mariadb-server)
command -v mariadb >/dev/null || need+=(mariadb-client)
if [ "$what" = test ]; then
  { have_php_ext pdo_mysql && have_php_ext mysqli; } || need+=(php-cli php-mysql)
  have_python_module pymysql || need+=(python3-pymysql)
  have_python_module MySQLdb || need+=(python3-mysqldb)
  command -v sysbench >/dev/null || need+=(sysbench)
  command -v node >/dev/null || need+=(nodejs)
  command -v npm >/dev/null || need+=(npm)
  # promtool checks and unit-tests deploy/prometheus-rules.yml (make test-rules).
  command -v promtool >/dev/null || need+=(prometheus)
  # Headless Chromium for the status page's browser test (tests/web).
  command -v chromium >/dev/null || need+=(chromium)
  command -v podman >/dev/null || need+=(podman)
  # The image's test runs containers with runc: crun refuses a machine whose
  # cgroup v1 controllers have a cgroup v2 hierarchy beside them (hybrid).
  command -v runc >/dev/null || need+=(runc)
  # make test-deb verifies the packaged units offline (no running systemd needed).
  command -v systemd-analyze >/dev/null || need+=(systemd)
  # The fleet's tests run a 3-member etcd cluster (tests/fleet_test.go).
  command -v etcd >/dev/null || [ -x /usr/bin/etcd ] || need+=(etcd-server)
fi
if [ "$what" = bench ]; then
  command -v sysbench >/dev/null || need+=(sysbench)
  command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || need+=(haproxy)
fi

if [ ${#need[@]} -gt 0 ]; then
  echo "deps: installing ${need[*]}"
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "deps: missing ${need[*]}; install them (Debian: apt-get install ${need[*]}) and retry" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Keep package scripts from starting a system MariaDB (or etcd) service: sandbox runs its own.
  policy=/usr/sbin/policy-rc.d
  created_policy=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    created_policy=1
  fi
  log=$(mktemp)
  trap '[ $created_policy = 1 ] && rm -f "$policy"; rm -f "$log"' EXIT
  # apt's chatter goes to a log that is shown only when a step fails.
  if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}"; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "deps: installing ${need[*]} failed" >&2
    exit 1
  fi
fi

if [ "$what" = test ]; then
  # mysql2 for the Node.js client, exactly as package-lock.json pins it.
  # Reinstalled only when node_modules does not match the pinned version.
  nodedir=tests/testdata/clients/node
  installed() {
    (cd "$nodedir" && node -e '
      const want = require("./package.json").dependencies.mysql2;
      let have = "";
      try { have = require("./node_modules/mysql2/package.json").version; } catch (e) {}
      process.exit(have === want ? 0 : 1);' 2>/dev/null)
  }
  if ! installed; then
    echo "deps: installing the Node.js packages of $nodedir"
    (cd "$nodedir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    installed || {
      echo "deps: npm ci in $nodedir did not install the pinned mysql2" >&2
      exit 1
    }
  fi
fi
exit 0
