"""What runs in worker processes: one module per pipeline stage, each its Celery task next to the
function it calls (``ingest``, ``layout``, ``recognition``, ``assembly``, ``sweep``); the retry
policy; engine setup; and the Django-free ``engines`` and ``content`` packages.

Workers import ``apps.jobs`` (models, services, states); ``apps`` never imports ``workers``.
"""
