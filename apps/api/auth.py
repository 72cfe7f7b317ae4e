"""Who is calling and which tenant they act for. The one place the API asks either question."""

from __future__ import annotations

from rest_framework.request import Request


def tenant_of(request: Request) -> str:
    """The tenant a request acts for: for token and session users, their username."""
    user = request.user
    return user.get_username() if user and user.is_authenticated else ""


def actor_of(request: Request) -> str:
    user = request.user
    return user.get_username() if user and user.is_authenticated else ""
