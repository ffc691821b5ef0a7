"""Configuration: YAML file (default ``configs/default.yaml``) plus environment overrides.

``RAGROUTER__a__b__c=value`` sets ``a.b.c`` (the value is parsed as YAML, so numbers, booleans
and lists work). Settings are read with :meth:`Config.get` using dotted paths; a missing or
malformed setting raises :class:`ConfigError` naming the file and the setting.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import yaml

from ragrouter.paths import REPO_ROOT

DEFAULT_CONFIG = REPO_ROOT / "configs" / "default.yaml"
ENV_PREFIX = "RAGROUTER__"
ROLES = ("generators", "extractor", "judge", "query_generator", "embedder")
BACKEND_KINDS = ("local", "local-encoder", "openai")


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the file and the setting."""


def _deep_merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


class Config:
    """A loaded configuration (a nested dict) with dotted-path access."""

    def __init__(self, data: dict, source: str = "<dict>") -> None:
        self.data = data
        self.source = source
        self.validate()

    # --- loading -------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path | None = None, env: dict[str, str] | None = None) -> "Config":
        """Load the default config, merge ``path`` over it (if given), then the environment."""
        env = os.environ if env is None else env
        path = Path(path or env.get("RAGROUTER_CONFIG") or DEFAULT_CONFIG)
        data = cls._read(DEFAULT_CONFIG)
        if path.resolve() != DEFAULT_CONFIG.resolve():
            data = _deep_merge(data, cls._read(path))
        for key, raw in sorted(env.items()):
            if not key.startswith(ENV_PREFIX):
                continue
            parts = [p for p in key[len(ENV_PREFIX):].split("__") if p]
            try:
                value = yaml.safe_load(raw)
            except yaml.YAMLError as exc:
                raise ConfigError(f"environment {key}: not a YAML value ({exc.__class__.__name__})") from None
            node = data
            for part in parts[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise ConfigError(f"environment {key}: '{part}' is not a section")
            node[parts[-1]] = value
        return cls(data, source=str(path))

    @staticmethod
    def _read(path: Path) -> dict:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
        return data

    # --- access --------------------------------------------------------------------------
    def get(self, dotted: str, default: Any = ...) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif default is not ...:
                return default
            else:
                raise ConfigError(f"{self.source}: setting '{dotted}' is missing")
        return node

    def section(self, dotted: str) -> dict:
        value = self.get(dotted, {})
        if not isinstance(value, dict):
            raise ConfigError(f"{self.source}: setting '{dotted}' must be a mapping")
        return value

    def backend(self, name: str) -> dict:
        backends = self.section("backends")
        if name not in backends:
            raise ConfigError(f"{self.source}: backend '{name}' is not defined under 'backends'")
        return {"name": name, **backends[name]}

    def role(self, role: str) -> str | list[str]:
        if role not in ROLES:
            raise ConfigError(f"{self.source}: unknown role '{role}' (roles: {', '.join(ROLES)})")
        return self.get(f"roles.{role}")

    def generators(self) -> list[str]:
        gens = self.role("generators")
        return [gens] if isinstance(gens, str) else list(gens)

    def hash(self, *sections: str) -> str:
        """Stable short hash of the named sections (for unit keys of config-dependent work)."""
        payload = {s: self.get(s, None) for s in sections}
        blob = json.dumps(payload, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    # --- validation ----------------------------------------------------------------------
    def validate(self) -> None:
        backends = self.data.get("backends") or {}
        if not isinstance(backends, dict):
            raise ConfigError(f"{self.source}: 'backends' must be a mapping")
        for name, spec in backends.items():
            where = f"{self.source}: backends.{name}"
            if not isinstance(spec, dict):
                raise ConfigError(f"{where} must be a mapping")
            kind = spec.get("kind")
            if kind not in BACKEND_KINDS:
                raise ConfigError(f"{where}.kind must be one of {', '.join(BACKEND_KINDS)} (got {kind!r})")
            if not spec.get("model"):
                raise ConfigError(f"{where}.model is missing")
            if "api_key" in spec:
                raise ConfigError(f"{where}.api_key: never put a key in the config; set api_key_env "
                                  "to the name of the environment variable that holds it")
            if kind == "openai" and not spec.get("base_url"):
                raise ConfigError(f"{where}.base_url is missing")
            for key in ("concurrency", "retries"):
                if key in spec and (not isinstance(spec[key], int) or spec[key] < 0):
                    raise ConfigError(f"{where}.{key} must be a non-negative integer")
        roles = self.data.get("roles") or {}
        for role, value in roles.items():
            if role not in ROLES:
                raise ConfigError(f"{self.source}: roles.{role} is not a role ({', '.join(ROLES)})")
            names = value if isinstance(value, list) else [value]
            for name in names:
                if name not in backends:
                    raise ConfigError(f"{self.source}: roles.{role} names backend '{name}', "
                                      "which is not defined under 'backends'")
