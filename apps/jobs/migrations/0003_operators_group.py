"""The "Operators" group: may look at everything in the console, retry and cancel jobs; may not
change, delete, re-run or purge them (superusers may)."""

from django.contrib.auth.management import create_permissions
from django.db import migrations

OPERATOR_PERMISSIONS = [
    ("jobs", "view_job"),
    ("jobs", "view_page"),
    ("jobs", "view_region"),
    ("jobs", "view_stageevent"),
    ("jobs", "retry_job"),
    ("jobs", "cancel_job"),
]


def create_operators(apps, schema_editor):
    # Permissions are normally created after all migrations (post_migrate); make them now so the
    # group can be given them in the same run.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    group, _ = Group.objects.get_or_create(name="Operators")
    for app_label, codename in OPERATOR_PERMISSIONS:
        group.permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))


def remove_operators(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name="Operators").delete()


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_console_indexes_permissions"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [migrations.RunPython(create_operators, remove_operators)]
