"""PostgreSQL-only indexes for the operators' console (apps/jobs/admin.py):

- a trigram index on UPPER(filename): the admin's filename search is ``icontains`` (LIKE '%x%'),
  which no B-tree serves; without it every search scans the table (about 130 ms at 100k jobs).
  It also gives the planner statistics for the expression, so a common term walks the
  created_at index instead.
- an expression index on (finished_at - started_at): "sort by duration" becomes an index scan
  instead of sorting every row.

SQLite (the embedded profile) has neither operator class nor need: nothing is done there.
"""

import logging

from django.db import migrations

log = logging.getLogger(__name__)


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("CREATE INDEX IF NOT EXISTS job_duration ON jobs_job ((finished_at - started_at))")
        try:
            # pg_trgm is a trusted extension (PostgreSQL 13+): a database owner may create it.
            cursor.execute("SAVEPOINT console_trgm")
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            cursor.execute(
                "CREATE INDEX IF NOT EXISTS job_filename_trgm ON jobs_job USING gin (UPPER(filename::text) gin_trgm_ops)"
            )
            cursor.execute("RELEASE SAVEPOINT console_trgm")
        except Exception as exc:  # psycopg's errors; the console works without it, only slower
            cursor.execute("ROLLBACK TO SAVEPOINT console_trgm")
            log.warning("no trigram index for the console's filename search (%s); searches will scan", exc)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS job_filename_trgm")
        cursor.execute("DROP INDEX IF EXISTS job_duration")


class Migration(migrations.Migration):
    dependencies = [("jobs", "0004_job_job_tenant_idem_unique")]

    operations = [migrations.RunPython(create, drop)]
