#!/usr/bin/env bash
# Make sure Redis and PostgreSQL answer on localhost; start them where we can, else say what is
# missing. Used by `make test`, `make up` and .ci/run.
set -euo pipefail

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() {  # port name
  for _ in $(seq 1 50); do listening "$1" && return 0; sleep 0.2; done
  echo "services: $2 did not come up on 127.0.0.1:$1" >&2; return 1
}

if ! listening 6379; then
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
  if command -v pg_ctlcluster >/dev/null && ls /etc/postgresql >/dev/null 2>&1; then
    echo "services: starting PostgreSQL" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    wait_for 5432 postgresql
  else
    echo "services: nothing listens on :5432 and no PostgreSQL cluster is installed (apt-get install postgresql)" >&2
    exit 1
  fi
fi
