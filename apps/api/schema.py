"""How the OpenAPI document describes our credentials, so generated clients send them."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "apps.api.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "X-API-Key",
            "description": "A key from the admin, `<prefix>.<secret>`; also accepted as `Authorization: Api-Key <key>`.",
        }


class OIDCScheme(OpenApiAuthenticationExtension):
    target_class = "apps.api.auth.OIDCAuthentication"
    name = "OIDC"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}
