#!/usr/bin/env bash
# Services the tests need from the OS: PostgreSQL's server binaries (tests/pg_server.py starts its
# own server on a free port). Installs Debian's `postgresql` when they are missing and this runs as
# root with apt-get; otherwise says so in one line and goes on (those tests then skip). Never fails.
set -uo pipefail

if compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || command -v postgres >/dev/null; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "services: PostgreSQL not installed (needs root and apt-get to install); its tests will skip"
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
# The package's scripts would start the distribution's cluster service: forbid it for this install
# (exit 101 = action forbidden, see invoke-rc.d(8)) unless the machine already has a policy.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && own_policy=1
fi
trap '[ "$own_policy" = 1 ] && rm -f "$policy"' EXIT

start=$SECONDS
install() {
    timeout 900 apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends postgresql \
        >/tmp/evo-test-services.log 2>&1
}
if install || { timeout 300 apt-get -qq update >>/tmp/evo-test-services.log 2>&1 && install; }; then
    # Should a cluster have started all the same, stop it: the tests run their own server.
    if command -v pg_lsclusters >/dev/null; then
        pg_lsclusters --no-header 2>/dev/null | while read -r version cluster _; do
            pg_ctlcluster "$version" "$cluster" stop >/dev/null 2>&1 || true
        done
    fi
    echo "services: installed PostgreSQL in $((SECONDS - start)) s"
else
    echo "services: could not install PostgreSQL (see /tmp/evo-test-services.log); its tests will skip"
fi
exit 0
