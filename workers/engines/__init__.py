"""Engines behind two protocols (``base.LayoutEngine``, ``base.Recognizer``) with frozen configs.

Django-free and Celery-free (checked by import-linter); the only names they share with the
platform come from ``ocrsite.vocabulary``.
"""
