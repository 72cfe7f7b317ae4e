"""The admin-action recipe: one ``JobAction`` in ``ACTIONS`` makes the job page's button, the bulk
action and ``has_<name>_permission``; its ``<name>_job`` permission must be in
``Job.Meta.permissions`` (and its migration: tests/unit/test_migrations_agree.py)."""

from __future__ import annotations

from apps.jobs.admin import ACTIONS, JobAdmin
from apps.jobs.models import Job


def test_every_action_has_its_permission_on_the_model_and_no_permission_is_left_over():
    declared = {codename for codename, _ in Job._meta.permissions}
    assert declared == {f"{name}_job" for name in ACTIONS}


def test_every_action_is_offered_in_bulk_behind_its_own_permission():
    bulk = {action.__name__: action for action in JobAdmin.actions}
    assert set(bulk) == {f"{name}_jobs" for name in ACTIONS}
    for name, action in ACTIONS.items():
        assert list(bulk[f"{name}_jobs"].allowed_permissions) == [name]
        assert callable(getattr(JobAdmin, f"has_{name}_permission"))
        assert action.perm == f"jobs.{name}_job"
