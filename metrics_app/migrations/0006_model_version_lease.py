"""LERC training joins the one job lease (core/leases.py): the worker and heartbeat that lived in
the version's progress JSON ("worker": "host:pid", "heartbeat": ISO time) move to the lease
columns every leased job has (`lease`, `heartbeat_at`); the progress keeps what training
reports (phase, epoch, loss ...)."""

from django.db import migrations, models
from django.utils.dateparse import parse_datetime

LEASE_KEYS = ("worker", "heartbeat")


def progress_to_lease(apps, schema_editor):
    ModelVersion = apps.get_model("metrics_app", "ModelVersion")
    for version in ModelVersion.objects.all().iterator():
        progress = dict(version.progress or {})
        if not any(key in progress for key in LEASE_KEYS):
            continue
        worker = progress.pop("worker", "") or ""
        beat = progress.pop("heartbeat", "") or ""
        ModelVersion.objects.filter(pk=version.pk).update(
            lease=str(worker)[-100:], heartbeat_at=parse_datetime(beat) if beat else None,
            progress=progress)


def lease_to_progress(apps, schema_editor):
    ModelVersion = apps.get_model("metrics_app", "ModelVersion")
    for version in ModelVersion.objects.exclude(lease="", heartbeat_at=None).iterator():
        progress = dict(version.progress or {})
        if version.lease:
            progress["worker"] = version.lease
        if version.heartbeat_at:
            progress["heartbeat"] = version.heartbeat_at.isoformat()
        ModelVersion.objects.filter(pk=version.pk).update(progress=progress)


class Migration(migrations.Migration):

    dependencies = [
        ('metrics_app', '0005_judges'),
    ]

    operations = [
        migrations.AddField(
            model_name='modelversion',
            name='heartbeat_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='modelversion',
            name='lease',
            field=models.CharField(blank=True, help_text='Worker training the version (host:pid:token).', max_length=100),
        ),
        migrations.RunPython(progress_to_lease, lease_to_progress),
    ]
