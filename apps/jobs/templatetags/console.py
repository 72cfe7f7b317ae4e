"""The dashboard on the admin index: what operators see first."""

from __future__ import annotations

from django import template
from django.conf import settings

from apps.jobs import monitoring
from apps.jobs.console import STATUS_COLOURS

register = template.Library()


@register.inclusion_tag("admin/jobs/_dashboard.html", takes_context=True)
def console_dashboard(context) -> dict:
    request = context.get("request")
    if request is None or not request.user.has_perm("jobs.view_job"):
        return {"visible": False}
    stats = monitoring.dashboard()
    stats["by_status"] = [
        (value, label, n, STATUS_COLOURS.get(value, "#6c757d")) for value, label, n in stats["by_status"]
    ]
    return {"visible": True, "stats": stats, "flower_url": settings.FLOWER_URL}
