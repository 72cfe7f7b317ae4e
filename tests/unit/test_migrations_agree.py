"""The models and their migrations agree (``makemigrations --check``, also run by ``make lint``).

A model change without its migration (a new ``<name>_job`` permission for an admin action, a
field) would pass every test on a database the test runner builds from the models' state and fail
at the deployment's ``migrate``. (A new job engine is a catalogue line and needs none:
``Job.engine`` has no database choices, tests/unit/test_catalogue.py.)
"""

from __future__ import annotations

from django.apps import apps
from django.db.migrations.autodetector import MigrationAutodetector
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.state import ProjectState


def _unmigrated() -> dict:
    """What ``makemigrations`` would write, found as it finds it but with no database (the
    migration files' state against the models')."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    detector = MigrationAutodetector(loader.project_state(), ProjectState.from_apps(apps))
    return {app: [m.operations for m in migrations] for app, migrations in detector.changes(loader.graph).items()}


def test_every_model_change_has_its_migration():
    assert _unmigrated() == {}, "models changed without a migration: run manage.py makemigrations"
