"""The project: settings, URLs, the Celery app (``ocrsite.celery``) and the shared vocabulary.

Deliberately empty of imports, so the Django-free engines can import ``ocrsite.vocabulary``
without starting Celery; Django loads the Celery app when the jobs app is ready, and
``celery -A ocrsite`` finds ``ocrsite.celery`` by itself.
"""
