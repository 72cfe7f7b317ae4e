#!/usr/bin/env bash
# Make sure Redis and PostgreSQL answer on localhost: start them, and on Debian/Ubuntu as root
# install them first (apt) when they are missing, so `make test` works on a fresh machine.
# Used by `make test`, `make up` and .ci/run.
set -euo pipefail

apt_install() {  # packages...: install as root through apt, or say what to run
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "services: installing $* (apt)" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@") \
      >/tmp/ocr-services-apt.log 2>&1 || { echo "services: apt-get install $* failed (see /tmp/ocr-services-apt.log)" >&2; exit 1; }
  else
    echo "services: $* missing and not root on an apt system: install them (apt-get install $*)" >&2
    exit 1
  fi
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() {  # port name
  for _ in $(seq 1 50); do listening "$1" && return 0; sleep 0.2; done
  echo "services: $2 did not come up on 127.0.0.1:$1" >&2; return 1
}

if ! listening 6379; then
  command -v redis-server >/dev/null || apt_install redis-server
  if command -v redis-server >/dev/null; then
    echo "services: starting redis-server on :6379" >&2
    mkdir -p /tmp/ocr-redis
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp/ocr-redis \
      --logfile /tmp/ocr-redis/redis.log
    wait_for 6379 redis
  else
    echo "services: nothing listens on :6379 and redis-server is not installed (apt-get install redis-server)" >&2
    exit 1
  fi
fi

if [ "${OCR_NEED_POSTGRES:-1}" = "1" ] && ! listening 5432; then
  if ! { command -v pg_ctlcluster >/dev/null && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; }; then
    apt_install postgresql
    # The cluster apt just made is this machine's test database: the suite connects as
    # postgres@127.0.0.1 without a password (TEST_DATABASE_URL), so loopback is trusted.
    hba=$(ls /etc/postgresql/*/main/pg_hba.conf | head -n1)
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main stop >/dev/null 2>&1 || true
  fi
  if command -v pg_ctlcluster >/dev/null && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; then
    echo "services: starting PostgreSQL" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    wait_for 5432 postgresql
  else
    echo "services: nothing listens on :5432 and no PostgreSQL cluster is installed (apt-get install postgresql)" >&2
    exit 1
  fi
fi
