"""Typed readers for the environment. Each fails loudly on a value it cannot parse.

A setting whose secret lives in a file (Kubernetes secrets, Docker secrets) is read from
``NAME_FILE`` when that is set; an unreadable file is an error, never a silent default.
"""

from __future__ import annotations

import os
from pathlib import Path


class ConfigError(RuntimeError):
    pass


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_secret(name: str, default: str = "") -> str:
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            raise ConfigError(f"{name}_FILE={path!r} cannot be read: {exc}") from exc
    return os.environ.get(name, default)


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not an integer") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not a number") from exc


_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean (use true/false)")


def env_list(name: str, default: list[str] | None = None) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default or [])
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    value = os.environ.get(name, default)
    if value not in choices:
        raise ConfigError(f"{name}={value!r} must be one of {', '.join(choices)}")
    return value
