#!/usr/bin/env python
"""Django's command-line utility; ``python manage.py ocr FILE`` runs the embedded pipeline."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ocrsite.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
