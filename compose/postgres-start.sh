#!/bin/sh
# First start: a cluster whose superuser has POSTGRES_PASSWORD and a database for the app;
# password authentication only, listening on POSTGRES_HOST:POSTGRES_PORT.
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD (compose/.env)}"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb --username="${POSTGRES_USER:-ocr}" --pwfile="$pwfile" --auth=scram-sha-256 --encoding=UTF8 -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -k /tmp" -w start >/dev/null
  PGPASSWORD=$POSTGRES_PASSWORD createdb -h /tmp -U "${POSTGRES_USER:-ocr}" "${POSTGRES_DB:-ocr}"
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
exec postgres -D "$PGDATA" -c listen_addresses="${POSTGRES_HOST:-127.0.0.1}" -p "${POSTGRES_PORT:-5432}" -k /tmp
