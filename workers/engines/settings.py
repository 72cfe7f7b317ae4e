"""What an engine's ``from_settings`` reads: the deployment's settings, frozen once per process.

Engines import no Django. ``workers.engine_setup`` copies the deployment's settings into a
``DeploymentSettings`` once, with what the process itself decided (intra-op threads, memory
first), and each engine's config builds itself from it with a ``from_settings`` next to the
engine (``PaddleLayoutConfig.from_settings``, ``VllmConfig.from_settings``,
``workers.engines.cpu.settings``). So adding an engine touches neither ``EngineSettings`` nor
``engine_setup``: its adapter builds its config from these settings (a new setting itself is
the setting recipe: ``ocrsite/settings.py`` and its ``HELP`` line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePath
from typing import Any

_PLAIN = (str, int, float, bool, type(None), PurePath)


@dataclass(frozen=True)
class DeploymentSettings:
    # (name, value) for every upper-case setting with a plain value (lists as tuples): hashable,
    # so a config built from it keys the per-process engine caches.
    values: tuple[tuple[str, Any], ...] = ()
    threads: int = 0  # intra-op threads per engine in this process; 0: the engine's own choice
    memory_first: bool = False  # this process chose peak memory over CPU (the embedded CLI)
    # The worker's shutdown flag (workers.drain): true once pages in flight should be handed back
    # rather than waited on. Not part of the settings' identity (compare=False).
    stopping: Callable[[], bool] = field(default=lambda: False, compare=False)

    @classmethod
    def of(
        cls,
        settings: object,
        *,
        threads: int = 0,
        memory_first: bool = False,
        stopping: Callable[[], bool] | None = None,
    ) -> DeploymentSettings:
        """A frozen copy of ``settings``' (Django's, or any object's) upper-case plain values."""
        values = []
        for name in sorted(n for n in dir(settings) if n.isupper()):
            value = getattr(settings, name)
            if isinstance(value, list | tuple) and all(isinstance(v, _PLAIN) for v in value):
                value = tuple(value)
            elif not isinstance(value, _PLAIN):
                continue  # dicts and objects (DATABASES, CACHES...): no engine reads them
            values.append((name, value))
        return cls(
            tuple(values), threads=threads, memory_first=memory_first, **({"stopping": stopping} if stopping else {})
        )

    @cached_property
    def _by_name(self) -> dict[str, Any]:
        return dict(self.values)

    def get(self, name: str, default: Any = None) -> Any:
        """A setting's value; ``default`` only for a bare ``DeploymentSettings()`` (no deployment)."""
        return self._by_name[self._known(name)] if self.values else default

    def pick(self, **fields: str) -> dict[str, Any]:
        """``{field: value}`` for each ``field=SETTING_NAME``: a config's keyword arguments. A bare
        ``DeploymentSettings()`` gives none, so every config stands at its own defaults."""
        return {field: self._by_name[self._known(name)] for field, name in fields.items()} if self.values else {}

    def _known(self, name: str) -> str:
        # A deployment's copy holds every setting: a name it lacks is a setting never declared.
        if name not in self._by_name:
            raise KeyError(f"{name} is not a setting: declare it in ocrsite/settings.py with its HELP line")
        return name
