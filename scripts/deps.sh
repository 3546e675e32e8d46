#!/usr/bin/env bash
# Installs what `make run` and `make test` need from Debian's packages when it
# is missing and the machine allows (root with apt-get): the MariaDB server and
# client, and for the client-compatibility tests PHP with PDO MySQL.
# usage: scripts/deps.sh [server|test]
set -euo pipefail
what=${1:-server}
need=()
have_server() { command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || command -v mysqld >/dev/null || [ -x /usr/sbin/mysqld ]; }
have_server || need+=(mariadb-server)
command -v mariadb >/dev/null || need+=(mariadb-client)
if [ "$what" = test ]; then
  php -r 'exit(extension_loaded("pdo_mysql") ? 0 : 1);' >/dev/null 2>&1 || need+=(php-cli php-mysql)
fi
[ ${#need[@]} -eq 0 ] && exit 0
echo "deps: installing ${need[*]}"
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "deps: missing ${need[*]}; install them (Debian: apt-get install ${need[*]}) and retry" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Keep package scripts from starting a system MariaDB service: sandbox runs its own.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; created_policy=1; fi
trap '[ $created_policy = 1 ] && rm -f "$policy"' EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
