"""Tenants are explicit: no username, admin path or bare key reaches a tenant's documents by
coincidence. The helpdesk account below may manage users, API users, API keys and tenants, but
not jobs; it tries every admin path the issue's attacker used (and the ones next to them)."""

from __future__ import annotations

import io
import ipaddress
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from apps.api.models import Tenant, TenantAPIKey, TenantUser
from apps.jobs.models import Job
from apps.webhooks import egress
from apps.webhooks import services as hooks
from apps.webhooks.models import WebhookDelivery
from ocrsite.vocabulary import ErrorCode
from tests.hostile.corpus import text_pdf
from tests.support.perimeter import key_client, new_key

SECRET_TEXT = b"acme quarterly figures"


@pytest.fixture
def acme_job(db) -> Job:
    Tenant.objects.create(slug="acme")
    job = Job.objects.create(tenant="acme", status="done", filename="q.pdf", kind="pdf", sha256="0" * 64)
    job.result_markdown.save(f"{job.pk}.md", ContentFile(SECRET_TEXT), save=True)
    job.result_json.save(f"{job.pk}.json", ContentFile(b'{"pages": []}'), save=True)
    return job


@pytest.fixture
def helpdesk(db) -> Client:
    """Staff that manages accounts and keys, with every permission of the api, auth and authtoken
    apps, and none on jobs."""
    user = get_user_model().objects.create_user(username=f"helpdesk-{uuid.uuid4().hex[:6]}", password="x")
    user.is_staff = True
    user.save()
    user.user_permissions.set(Permission.objects.filter(content_type__app_label__in=("api", "auth", "authtoken")))
    client = Client()
    client.force_login(user)
    client.user = user
    return client


def _token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_a_user_named_like_a_tenant_reaches_nothing(helpdesk, acme_job):
    # The helpdesk may create users: it makes one named like the tenant...
    resp = helpdesk.post(
        reverse("admin:auth_user_add"),
        {"username": "acme", "password1": "Long-enough-9x!", "password2": "Long-enough-9x!", "usable_password": "true"},
    )
    assert resp.status_code == 302, resp.content[:500]
    impostor = get_user_model().objects.get(username="acme")
    # ...and even with a token for it (made here: the token admin is gone, see below), the API
    # finds no tenant link and refuses.
    client = _token_client(impostor)
    for path in ("/api/v1/jobs", f"/api/v1/jobs/{acme_job.pk}", f"/api/v1/jobs/{acme_job.pk}/result"):
        resp = client.get(path)
        assert resp.status_code == 403, (path, resp.content[:300])
        assert resp.json()["error"]["code"] == ErrorCode.AUTH_FORBIDDEN
        assert SECRET_TEXT not in resp.content


def test_the_helpdesk_cannot_grant_itself_a_tenants_reach(helpdesk, acme_job):
    # No token admin (it listed every key in plain text).
    assert helpdesk.get("/admin/authtoken/tokenproxy/").status_code == 404
    # No API key and no API-user link for a tenant without the permission to read jobs.
    for name in ("admin:api_tenantapikey_add", "admin:api_tenantuser_add"):
        assert helpdesk.get(reverse(name)).status_code == 403, name
    resp = helpdesk.post(reverse("admin:api_tenantapikey_add"), {"name": "mine", "tenant": "acme"})
    assert resp.status_code == 403
    assert not TenantAPIKey.objects.filter(tenant="acme").exists()
    resp = helpdesk.post(
        reverse("admin:api_tenantuser_add"), {"user": helpdesk.user.pk, "tenant": Tenant.objects.get(slug="acme").pk}
    )
    assert resp.status_code == 403
    assert not TenantUser.objects.exists()
    # No self-promotion: the user admin keeps permissions, groups and flags for superusers.
    view_job = Permission.objects.get(codename="view_job")
    change = reverse("admin:auth_user_change", args=[helpdesk.user.pk])
    resp = helpdesk.post(
        change,
        {
            "username": helpdesk.user.username,
            "user_permissions": [view_job.pk],
            "is_superuser": "on",
            "is_staff": "on",
            "is_active": "on",
            "date_joined_0": "2026-01-01",
            "date_joined_1": "00:00:00",
        },
    )
    assert resp.status_code == 302, resp.content[:500]  # saved: only the privileges were ignored
    helpdesk.user.refresh_from_db()
    assert not helpdesk.user.is_superuser
    assert not helpdesk.user.has_perm("jobs.view_job")
    # And the console's own pages of the job stay closed.
    job = acme_job.pk
    for path in (
        reverse("admin:jobs_job_changelist"),
        reverse("admin:jobs_job_change", args=[job]),
        reverse("admin:jobs_job_download", args=[job, "markdown"]),
        reverse("admin:jobs_job_page", args=[job, 0]),
    ):
        resp = helpdesk.get(path)
        assert resp.status_code in (403, 404), (path, resp.status_code)
        assert SECRET_TEXT not in resp.content


def test_api_keys_are_never_shown_after_creation(admin_client, acme_job):
    key, raw = new_key("acme")
    for path in (reverse("admin:api_tenantapikey_changelist"), reverse("admin:api_tenantapikey_change", args=[key.pk])):
        page = admin_client.get(path).content.decode()
        assert key.prefix in page and raw.split(".")[1] not in page


def test_a_linked_user_acts_for_its_tenant_only(acme_job):
    user = get_user_model().objects.create_user(username="someone-else", password="x")
    TenantUser.objects.create(user=user, tenant=Tenant.objects.get(slug="acme"))
    client = _token_client(user)
    assert client.get(f"/api/v1/jobs/{acme_job.pk}/result").content == SECRET_TEXT
    _, raw = new_key("other")
    assert key_client(raw).get(f"/api/v1/jobs/{acme_job.pk}").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize("tenant", ["", " ", "a b", "x/y"])
def test_create_api_key_refuses_a_key_for_no_tenant(tenant):
    with pytest.raises(CommandError):
        call_command("create_api_key", tenant, stdout=io.StringIO(), stderr=io.StringIO())
    assert not TenantAPIKey.objects.exists()


@pytest.mark.django_db
def test_create_api_key_names_an_explicit_tenant():
    call_command("create_api_key", "newco", stdout=io.StringIO(), stderr=io.StringIO())
    assert Tenant.objects.filter(slug="newco").exists()
    assert TenantAPIKey.objects.get().tenant == "newco"


# --- fair share of the backlog -------------------------------------------------------------------


def _pdf(client, pages: int):
    fh = io.BytesIO(text_pdf(f"{uuid.uuid4().hex} fair share", pages=pages))
    fh.name = "flood.pdf"
    return client.post("/api/v1/jobs", {"file": fh}, format="multipart")


@pytest.mark.django_db
def test_a_flood_from_one_tenant_refuses_that_tenant_only(settings):
    """Jobs stay queued (nothing is sent to a worker without a commit): the backlog is the
    database's count of waiting pages, as in production."""
    settings.OCR_BACKPRESSURE_PAGES = 10
    _, flood_key = new_key("flooder")
    _, quiet_key = new_key("quiet")
    flooder, quiet = key_client(flood_key), key_client(quiet_key)
    for _ in range(2):  # 0, then 5 pages waiting: with the new 5, not over the threshold
        assert _pdf(flooder, 5).status_code == 202
    refused = _pdf(flooder, 5)
    assert refused.status_code == 503
    error = refused.json()["error"]
    assert error["code"] == ErrorCode.BUSY_BACKPRESSURE and refused["Retry-After"]
    # The message is about the caller's own pages, never the platform's queue or threshold.
    assert "has 10 pages waiting" in error["message"] and "threshold" not in error["message"]
    # The other tenant is admitted while the flooder waits, and again with a bigger document.
    assert _pdf(quiet, 1).status_code == 202
    assert _pdf(quiet, 4).status_code == 202
    assert _pdf(flooder, 1).status_code == 503
    assert Job.objects.filter(tenant="quiet").count() == 2


@pytest.mark.django_db
def test_admission_counts_the_pages_being_admitted(settings):
    """The issue's overshoot: a tenant under its share added a 1,000-page document to an over-full
    backlog and was accepted (backlog 4.7x the threshold)."""
    settings.OCR_BACKPRESSURE_PAGES = 200
    _, flood_key = new_key("flooder")
    _, modest_key = new_key("modest")
    flooder, modest = key_client(flood_key), key_client(modest_key)
    # The flooder fills the backlog past the threshold (its first document, alone, is admitted).
    assert _pdf(flooder, 250).status_code == 202
    assert _pdf(modest, 3).status_code == 202  # a tenant under its share is admitted...
    refused = _pdf(modest, 1000)  # ...but not with a document that would take it far past it
    assert refused.status_code == 503, refused.content[:300]
    assert refused.json()["error"]["code"] == ErrorCode.BUSY_BACKPRESSURE
    assert "this document has 1000" in refused.json()["error"]["message"]
    assert Job.objects.filter(tenant="modest").count() == 1
    # On an idle platform one big document is admitted (it cannot wait for a smaller backlog).
    Job.objects.all().delete()
    assert _pdf(modest, 1000).status_code == 202


@pytest.mark.django_db
def test_a_tenants_own_backlog_share_caps_it_on_an_idle_platform(settings):
    settings.OCR_BACKPRESSURE_PAGES = 100
    Tenant.objects.create(slug="small", backlog_share=0.05)  # at most 5 pages waiting
    _, raw = new_key("small")
    small = key_client(raw)
    assert _pdf(small, 4).status_code == 202
    refused = _pdf(small, 2)
    assert refused.status_code == 503
    assert refused.json()["error"]["message"].startswith("this tenant has 4 pages waiting")
    _, other = new_key("big")
    assert _pdf(key_client(other), 50).status_code == 202


# --- webhook egress: IPv6 forms of IPv4 addresses, and networks per tenant ----------------------


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::a9fe:a9fe",  # NAT64 (RFC 6052) of 169.254.169.254, the metadata service
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b:1::a00:1",  # local-use NAT64 (RFC 8215) of 10.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "2002:0a00:0001::",  # 6to4 of 10.0.0.1
        "::10.0.0.1",  # IPv4-compatible
        "::169.254.169.254",
        "::ffff:127.0.0.1",  # IPv4-mapped
        "2001:0:a9fe:a9fe::1",  # Teredo whose server is the metadata address
    ],
)
def test_ipv6_forms_carrying_a_private_ipv4_are_refused(address):
    assert egress.refused(address, [])
    # An allow-list entry for the IPv4 network lets its IPv6 forms through too, and only those.
    carried = egress.carried_ipv4(ipaddress.IPv6Address(address))
    assert carried and not egress.refused(address, egress.parse_nets([f"{v4}/32" for v4 in carried]))


def test_ipv6_forms_carrying_a_public_ipv4_are_judged_as_that_address():
    assert not egress.refused("64:ff9b::5db8:d70e", [])  # 93.184.215.14 behind NAT64
    assert not egress.refused("2002:5db8:d70e::1", [])
    assert not egress.refused("2606:4700::1111", [])  # plain public IPv6 carries nothing


class _Receiver(BaseHTTPRequestHandler):
    """A webhook receiver on 127.0.0.1 that counts what reaches it."""

    received: list[bytes] = []

    def do_POST(self) -> None:
        _Receiver.received.append(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.mark.django_db
def test_webhook_networks_are_per_tenant():
    Tenant.objects.create(slug="in-cluster", webhook_allow_nets="127.0.0.0/8, 10.20.0.0/16")
    Tenant.objects.create(slug="elsewhere")
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    try:
        outcomes = {}
        for tenant in ("in-cluster", "elsewhere"):
            delivery = WebhookDelivery.objects.create(tenant=tenant, event="job.done", url=url, payload={})
            outcomes[tenant] = hooks.post(delivery, "{}", timezone.now())
        assert outcomes["in-cluster"].status_code == 200
        assert outcomes["elsewhere"].error_code == ErrorCode.WEBHOOK_ADDRESS_REFUSED
        assert len(_Receiver.received) == 1, "only the tenant that allows loopback reached it"
    finally:
        server.shutdown()
        server.server_close()


# --- roles that cannot climb (issue 35) -----------------------------------------------------------


def _account(username: str, **flags) -> object:
    return get_user_model().objects.create_user(username=username, password="Old-password-9x!", **flags)


def _operator():
    user = _account(f"operator-{uuid.uuid4().hex[:6]}", is_staff=True)
    user.groups.add(Group.objects.get(name="Operators"))
    return user


NEW_PASSWORD = {"password1": "Helpdesk-owns-you-9x!", "password2": "Helpdesk-owns-you-9x!", "usable_password": "true"}


@pytest.mark.parametrize("target", ["superuser", "operator"])
def test_the_helpdesk_cannot_set_a_more_powerful_accounts_password(helpdesk, acme_job, target):
    """The issue's climb: a user-manager set a superuser's (or an operator's) password in the
    admin's password form and logged in as them."""
    user = _account("root-2", is_staff=True, is_superuser=True) if target == "superuser" else _operator()
    form = reverse("admin:auth_user_password_change", args=[user.pk])
    assert helpdesk.get(form).status_code == 403
    resp = helpdesk.post(form, NEW_PASSWORD)
    assert resp.status_code == 403
    user.refresh_from_db()
    assert user.check_password("Old-password-9x!")
    assert not Client().login(username=user.username, password=NEW_PASSWORD["password1"])
    # Nor through the change form (flags, e-mail for a reset, active) or deletion.
    change = reverse("admin:auth_user_change", args=[user.pk])
    resp = helpdesk.post(change, {"username": user.username, "is_active": "", "date_joined_0": "2026-01-01"})
    assert resp.status_code == 403
    assert helpdesk.post(reverse("admin:auth_user_delete", args=[user.pk]), {"post": "yes"}).status_code == 403
    resp = helpdesk.post(
        reverse("admin:auth_user_changelist"),
        {"action": "delete_selected", "_selected_action": [user.pk], "post": "yes"},
    )
    assert resp.status_code == 403
    assert get_user_model().objects.filter(pk=user.pk, is_active=True).exists()


def test_the_helpdesk_manages_accounts_that_may_do_no_more_than_itself(helpdesk):
    plain = _account("api-user")
    form = reverse("admin:auth_user_password_change", args=[plain.pk])
    assert helpdesk.post(form, NEW_PASSWORD).status_code == 302
    plain.refresh_from_db()
    assert plain.check_password(NEW_PASSWORD["password1"])
    # A non-staff account holding a permission the helpdesk lacks (reading jobs) is out of reach too.
    reader = _account("job-reader")
    reader.user_permissions.add(Permission.objects.get(codename="view_job"))
    assert helpdesk.post(reverse("admin:auth_user_password_change", args=[reader.pk]), NEW_PASSWORD).status_code == 403


def test_groups_are_for_superusers_only(helpdesk):
    """A helpdesk in a group it could edit would give the group, and so itself, job permissions."""
    group = Group.objects.create(name="helpdesks")
    helpdesk.user.groups.add(group)
    view_job = Permission.objects.get(codename="view_job")
    resp = helpdesk.post(
        reverse("admin:auth_group_change", args=[group.pk]), {"name": "helpdesks", "permissions": [view_job.pk]}
    )
    assert resp.status_code == 403
    resp = helpdesk.post(reverse("admin:auth_group_add"), {"name": "readers", "permissions": [view_job.pk]})
    assert resp.status_code == 403
    assert not get_user_model().objects.get(pk=helpdesk.user.pk).has_perm("jobs.view_job")


def test_an_api_user_link_of_a_more_powerful_account_is_out_of_reach(acme_job):
    """A support lead may read jobs and manage links, but not re-point an operator's link to
    another tenant (or drop it): the link is part of the operator's account."""
    lead = _account("lead", is_staff=True)
    lead.user_permissions.set(
        Permission.objects.filter(codename__in=("view_job", "view_user", "change_user"))
        | Permission.objects.filter(content_type__app_label="api")
    )
    client = Client()
    client.force_login(lead)
    operator = _operator()
    other = Tenant.objects.create(slug="other")
    link = TenantUser.objects.create(user=operator, tenant=Tenant.objects.get(slug="acme"))
    resp = client.post(
        reverse("admin:api_tenantuser_change", args=[link.pk]), {"user": operator.pk, "tenant": other.pk}
    )
    assert resp.status_code == 403
    unlinked = _operator()
    resp = client.post(reverse("admin:api_tenantuser_add"), {"user": unlinked.pk, "tenant": other.pk})
    assert resp.status_code == 403
    assert not TenantUser.objects.filter(user=unlinked).exists()
    assert TenantUser.objects.get(user=operator).tenant.slug == "acme"
    assert client.post(reverse("admin:api_tenantuser_delete", args=[link.pk]), {"post": "yes"}).status_code == 403
    # Its own kind of account (no staff flag, no more permissions) it may link.
    plain = _account("plain")
    resp = client.post(reverse("admin:api_tenantuser_add"), {"user": plain.pk, "tenant": other.pk})
    assert resp.status_code == 302, resp.content[:300]
