from django.db import migrations, models
from django.db.models import F


def mark_purged(apps, schema_editor):
    # Jobs an operator purged before the marker existed: finished, with no source left.
    Job = apps.get_model("jobs", "Job")
    Job.objects.filter(source="", status__in=("done", "failed", "cancelled")).update(purged_at=F("updated_at"))


class Migration(migrations.Migration):
    dependencies = [("jobs", "0005_console_search_duration_indexes")]

    operations = [
        migrations.AddField(model_name="job", name="purged_at", field=models.DateTimeField(blank=True, null=True)),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("purged_at__isnull", True)), fields=["created_at"], name="job_unpurged_created"
            ),
        ),
        migrations.RunPython(mark_purged, migrations.RunPython.noop),
    ]
