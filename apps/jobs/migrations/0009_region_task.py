"""Region.task: the layout model's task for a box, which rode in ``flags`` as "task:<task>"."""

from django.db import migrations, models

TASK_FLAG = "task:"  # how earlier code spelled it inside flags


def flags_to_task(apps, schema_editor):
    Region = apps.get_model("jobs", "Region")
    batch = []
    for region in Region.objects.exclude(flags=[]).only("pk", "flags").iterator(chunk_size=2000):
        tasks = [str(f)[len(TASK_FLAG) :] for f in region.flags if str(f).startswith(TASK_FLAG)]
        if tasks:
            region.task = tasks[0]
            region.flags = [f for f in region.flags if not str(f).startswith(TASK_FLAG)]
            batch.append(region)
        if len(batch) >= 2000:
            Region.objects.bulk_update(batch, ["task", "flags"])
            batch = []
    Region.objects.bulk_update(batch, ["task", "flags"])


def task_to_flags(apps, schema_editor):
    Region = apps.get_model("jobs", "Region")
    batch = []
    for region in Region.objects.exclude(task="").only("pk", "task", "flags").iterator(chunk_size=2000):
        region.flags = [f"{TASK_FLAG}{region.task}", *region.flags]
        batch.append(region)
        if len(batch) >= 2000:
            Region.objects.bulk_update(batch, ["flags"])
            batch = []
    Region.objects.bulk_update(batch, ["flags"])


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0008_engine_catalogue"),
    ]

    operations = [
        migrations.AddField(
            model_name="region",
            name="task",
            field=models.CharField(
                blank=True,
                default="",
                help_text="what the layout model said to do with the box (text, table, formula, chart, skip, "
                "abandon); empty: the recognizer decides from the label",
                max_length=16,
            ),
        ),
        migrations.RunPython(flags_to_task, task_to_flags, elidable=True),
    ]
