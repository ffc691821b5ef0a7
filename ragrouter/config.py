"""Configuration: YAML file (default ``configs/default.yaml``) plus environment overrides.

``RAGROUTER__a__b__c=value`` sets ``a.b.c`` (the value is parsed as YAML, so numbers, booleans
and lists work). Settings are read with :meth:`Config.get` using dotted paths; a missing or
malformed setting raises :class:`ConfigError` naming the file and the setting.

The config is typed: the known settings and their types are derived from the shape of
``configs/default.yaml`` itself (a value's type from its default; ``null`` takes anything;
the user-named maps ``backends`` and ``querygen.reasoning_hops`` take any entry name, a
backend entry the keys seen in any default backend plus :data:`BACKEND_EXTRA_KEYS`), and
checked with pydantic. An unknown key is refused with the closest known one ("did you mean
concurrency?"); every error names where the value came from: the file and line, or the
environment variable.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError
from pydantic import create_model

from ragrouter.paths import DATA_ROOT

DEFAULT_CONFIG = DATA_ROOT / "configs" / "default.yaml"
ENV_PREFIX = "RAGROUTER__"
PROFILES_DIR = DATA_ROOT / "configs" / "profiles"  # `profile: NAME` merges PROFILES_DIR/NAME.yaml under the user's file
ROLES = ("generators", "extractor", "judge", "query_generator", "embedder")
BACKEND_KINDS = ("local", "local-encoder", "openai")


class ConfigError(ValueError):
    """A setting is missing or malformed; the message names the file and the setting."""


@dataclass(frozen=True)
class Prices:
    """US dollars per million tokens."""

    input: float
    output: float
    cached_input: float

    def cost(self, prompt: float, completion: float, cached_prompt: float = 0.0) -> float:
        cached = min(max(0.0, float(cached_prompt or 0)), float(prompt or 0))
        return ((float(prompt or 0) - cached) * self.input + cached * self.cached_input
                + float(completion or 0) * self.output) / 1e6


class PriceError(ValueError):
    """A price setting is malformed (the message names the backend)."""


def parse_prices(name: str, spec: dict, source: str = "config") -> Prices | None:
    """A backend's ``price_per_million`` (None: unpriced), checked when the config loads; what the
    prices make of the store's tokens is :mod:`ragrouter.llm.pricing`."""
    raw = spec.get("price_per_million")
    if raw is None:
        return None
    where = f"{source}: backends.{name}.price_per_million"
    if not isinstance(raw, dict):
        raise PriceError(f"{where} must be a mapping {{input, output, cached_input}}")
    unknown = sorted(set(raw) - {"input", "output", "cached_input"})
    if unknown:
        raise PriceError(f"{where}: unknown key(s) {', '.join(unknown)} (known: input, output, cached_input)")
    vals = {}
    for key in ("input", "output", "cached_input"):
        v = raw.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise PriceError(f"{where}.{key} must be a number >= 0 (got {v!r})")
        vals[key] = float(v)
    if not vals:
        return None
    if "input" not in vals or "output" not in vals:
        raise PriceError(f"{where} needs both input and output")
    return Prices(vals["input"], vals["output"], vals.get("cached_input", vals["input"]))



# Backend keys the code reads that no default backend entry shows (one place to add them).
BACKEND_EXTRA_KEYS = (
    "api_key_env", "base_url", "batch_size", "n_ctx", "n_parallel", "threads", "poll", "n_predict",
    "structured_output", "strict_schema", "dimensions", "api_key_required", "max_tokens_param",
    "encoding_format", "requests_per_minute", "tokens_per_minute", "price_per_million", "extra_body",
    "headers", "seed", "top_p", "max_completion_tokens", "preset", "n_gpu_layers", "flash_attn",
    "temperature", "max_tokens", "timeout_s", "retries", "concurrency", "api_key", "chat_api",
    "reasoning_allowance", "reasoning", "cut_prompt_share",
)
# Maps whose keys the user names (any key is allowed; values typed like the default's).
FREE_MAPS = ("backends", "querygen.reasoning_hops", "querygen.counts", "dry_run.completion_share")
# Settings whose type is wider than their default's.
WIDE_TYPES: dict[str, Any] = {f"roles.{r}": Union[StrictStr, list[StrictStr]] for r in ROLES}
# Similarity thresholds: one number for every embedder, or a map embedder model -> number.
_THRESHOLD = Union[StrictFloat, StrictInt, dict[str, Union[StrictFloat, StrictInt]]]
WIDE_TYPES.update({"retrieval.min_similarity": _THRESHOLD, "retrieval.entity_min_similarity": _THRESHOLD,
                   "dry_run.iterative_rounds": Union[StrictFloat, StrictInt]})

class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (PyYAML keeps the last
    in silence, so a duplicated setting would be ignored without a word)."""


class DuplicateKeyError(yaml.YAMLError):
    def __init__(self, key: str, line: int, first: int) -> None:
        super().__init__(f"line {line}: duplicate key '{key}' (first given at line {first})")
        self.key, self.line, self.first = key, line, first


def _construct_unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict = {}
    loader.flatten_mapping(node)
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue  # the base constructor reports an unhashable key
        if key in seen:
            raise DuplicateKeyError(str(key), key_node.start_mark.line + 1, seen[key])
        seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def load_yaml(text: str):
    """``yaml.safe_load`` that refuses duplicate keys (DuplicateKeyError names both lines)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


# Ranges of numeric settings, by the setting's own name wherever it appears (backends and
# sections alike; not inside extra_body/headers, which go to the provider as they are):
# (lowest, highest, whether the lowest itself is allowed); None = unbounded. null always
# means "the code's default" and passes.
RANGES: dict[str, tuple[float | None, float | None, bool]] = {
    "concurrency": (1, None, True), "retries": (0, None, True), "timeout_s": (0, None, False),
    "batch_size": (1, None, True), "n_ctx": (1, None, True), "n_parallel": (1, None, True),
    "threads": (1, None, True), "poll": (0, 100, True), "requests_per_minute": (0, None, False),
    "tokens_per_minute": (0, None, False),
    "temperature": (0, 2, True), "eval_temperature": (0, 2, True), "check_temperature": (0, 2, True),
    "top_p": (0, 1, False), "max_tokens": (1, None, True), "check_max_tokens": (1, None, True),
    "max_completion_tokens": (1, None, True), "threads_per_slot": (1, None, True),
    "lease_seconds": (0, None, False), "folds": (2, None, True), "samples": (1, None, True),
    "token_budget": (1, None, True), "top_k": (1, None, True), "window": (1, None, True),
    "overlap": (0, None, True), "seed_entities": (1, None, True), "entity_top_k": (1, None, True),
    "max_triples": (1, None, True), "ppr_alpha": (0, 1, False), "max_rounds": (0, None, True),
    "store_outage_s": (0, None, True), "reasoning_allowance": (0, None, True),
}
_OPAQUE = ("extra_body", "headers", "price_per_million")


def _range_text(lo, hi, lo_ok: bool) -> str:
    if hi is None:
        return f"{'>=' if lo_ok else '>'} {lo}"
    return f"between {lo} and {hi}" if lo_ok else f"> {lo} and <= {hi}"


_TYPE_NAMES = {StrictBool: "true or false", StrictInt: "an integer", StrictStr: "a string",
               list: "a list", dict: "a mapping"}


def _leaf_type(value: Any, key: str = "") -> Any:
    """The type a setting takes, from its default (durations, ``*_s``, take any number)."""
    if str(key).endswith("_s") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return Union[StrictFloat, StrictInt]
    if value is None:
        return Any
    if isinstance(value, bool):
        return StrictBool
    if isinstance(value, int):
        return StrictInt
    if isinstance(value, float):
        return Union[StrictFloat, StrictInt]
    if isinstance(value, str):
        return StrictStr
    if isinstance(value, list):
        return list
    return Any


def _model(name: str, shape: dict, path: str) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for i, (key, value) in enumerate(shape.items()):
        dotted = f"{path}.{key}" if path else str(key)
        if dotted in WIDE_TYPES:
            typ = WIDE_TYPES[dotted]
        elif dotted == "backends" and isinstance(value, dict):
            typ = dict[str, _backend_model(value)]
        elif dotted in FREE_MAPS and isinstance(value, dict):
            inner = {_leaf_type(v) for v in value.values()}
            typ = dict[Any, inner.pop() if len(inner) == 1 else Any]
        elif isinstance(value, dict):
            typ = _model(f"{name}_{i}", value, dotted)
        else:
            typ = _leaf_type(value, key)
        fields[f"f{i}"] = (typ | None if typ is not Any else Any, Field(default=None, alias=str(key)))
    return create_model(name, __config__=ConfigDict(extra="forbid", populate_by_name=False), **fields)


def _backend_model(backends: dict) -> type[BaseModel]:
    types: dict[str, set] = {}
    for spec in backends.values():
        for key, value in (spec or {}).items():
            types.setdefault(key, set()).add(_leaf_type(value, key) if not isinstance(value, dict) else dict)
    for key in BACKEND_EXTRA_KEYS:
        types.setdefault(key, {Any})
    shape = {}
    for key, seen in types.items():
        shape[key] = seen.pop() if len(seen) == 1 else Any
    fields = {f"f{i}": (t | None if t is not Any else Any, Field(default=None, alias=k))
              for i, (k, t) in enumerate(shape.items())}
    return create_model("Backend", __config__=ConfigDict(extra="forbid"), **fields)


_SCHEMA: type[BaseModel] | None = None


def schema() -> type[BaseModel]:
    """The pydantic model of the config, derived from configs/default.yaml's shape."""
    global _SCHEMA
    if _SCHEMA is None:
        _SCHEMA = _model("RagrouterConfig", Config._read(DEFAULT_CONFIG), "")
    return _SCHEMA


def _known_keys(loc: tuple) -> list[str]:
    """The keys allowed beside the last element of ``loc`` (for "did you mean")."""
    node: Any = Config._read(DEFAULT_CONFIG)
    parts = [str(p) for p in loc[:-1]]
    if parts[:1] == ["backends"] and len(parts) >= 2:
        keys = set()
        for spec in node.get("backends", {}).values():
            keys.update(spec or {})
        return sorted(keys | set(BACKEND_EXTRA_KEYS) - {"api_key"})
    for part in parts:
        node = node.get(part) if isinstance(node, dict) else None
    return sorted(map(str, node)) if isinstance(node, dict) else []


def _line_map(path: Path, text: str) -> dict[str, int]:
    """{dotted key: line number} of a YAML file (1-based)."""
    out: dict[str, int] = {}
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return out

    def walk(node, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                dotted = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
                out[dotted] = key_node.start_mark.line + 1
                walk(value_node, dotted)

    walk(root, "")
    return out


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

    def __init__(self, data: dict, source: str = "<dict>", origins: dict[str, str] | None = None) -> None:
        self.data = data
        self.source = source
        self.origins = origins or {}
        """{dotted setting: where its value came from ('FILE line N' or 'environment VAR')}."""
        self.check_types()
        self.validate()

    # --- loading -------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | Path | None = None, env: dict[str, str] | None = None) -> "Config":
        """Load the default config, merge ``path`` over it (if given), then the environment."""
        env = os.environ if env is None else env
        path = Path(path or env.get("RAGROUTER_CONFIG") or DEFAULT_CONFIG)
        data = cls._read(DEFAULT_CONFIG)
        origins = {k: f"{DEFAULT_CONFIG} line {n}" for k, n in cls._lines(DEFAULT_CONFIG).items()}
        user = cls._read(path) if path.resolve() != DEFAULT_CONFIG.resolve() else {}
        profile = env.get(f"{ENV_PREFIX}profile") or user.get("profile")
        if profile:  # a named profile sits between the defaults and the user's file
            prof_path = PROFILES_DIR / f"{profile}.yaml"
            if not prof_path.is_file():
                known = ", ".join(sorted(p.stem for p in PROFILES_DIR.glob("*.yaml")))
                raise ConfigError(f"{path if user.get('profile') else 'environment ' + ENV_PREFIX + 'profile'}: "
                                  f"unknown profile '{profile}' (profiles: {known})")
            data = _deep_merge(data, cls._read(prof_path))
            origins.update({k: f"{prof_path} line {n}" for k, n in cls._lines(prof_path).items()})
        if user:
            data = _deep_merge(data, user)
            origins.update({k: f"{path} line {n}" for k, n in cls._lines(path).items()})
        for key, raw in sorted(env.items()):
            if not key.startswith(ENV_PREFIX):
                continue
            parts = [p for p in key[len(ENV_PREFIX):].split("__") if p]
            try:
                value = load_yaml(raw)
            except DuplicateKeyError as exc:
                raise ConfigError(f"environment {key}: {exc}") from None
            except yaml.YAMLError as exc:
                raise ConfigError(f"environment {key}: not a YAML value ({exc.__class__.__name__})") from None
            node = data
            for part in parts[:-1]:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    raise ConfigError(f"environment {key}: '{part}' is not a section")
            if not parts:
                raise ConfigError(f"environment {key}: names no setting (RAGROUTER__section__key=value)")
            node[parts[-1]] = value
            dotted = ".".join(parts)
            for k in [k for k in origins if k == dotted or k.startswith(dotted + ".")]:
                origins.pop(k)
            origins[dotted] = f"environment {key}"
        return cls(data, source=str(path), origins=origins)

    @staticmethod
    def _lines(path: Path) -> dict[str, int]:
        try:
            return _line_map(path, path.read_text(encoding="utf-8"))
        except OSError:
            return {}

    @staticmethod
    def _read(path: Path) -> dict:
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        except IsADirectoryError:
            raise ConfigError(f"{path}: is a directory, not a config file") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the config file ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte offset {exc.start})") from None
        try:
            data = load_yaml(text) or {}
        except DuplicateKeyError as exc:
            raise ConfigError(f"{path} {exc}") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: top level must be a mapping")
        return data

    # --- access --------------------------------------------------------------------------
    def get(self, dotted: str, default: Any = ...) -> Any:
        """The setting at ``dotted``; ``default`` when it is missing or null (null in the
        config means "the code's default"), else ConfigError."""
        node: Any = self.data
        for part in dotted.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif default is not ...:
                return default
            else:
                raise ConfigError(f"{self.source}: setting '{dotted}' is missing")
        if node is None and default is not ...:
            return default
        return node

    def where(self, dotted: str) -> str:
        """Where setting ``dotted`` came from: 'FILE line N', 'environment VAR', or the file."""
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            origin = self.origins.get(".".join(parts[:n]))
            if origin:
                return origin
        # a section only the environment made (RAGROUTER__foo__bar=1 makes 'foo'): its settings' origin
        below = sorted(v for k, v in self.origins.items() if k.startswith(dotted + "."))
        return below[0] if below else self.source

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

    def bound_backends(self) -> set[str]:
        """Names of the backends the config binds to a role or a generator."""
        bound = set(self.generators())
        for role in ("extractor", "judge", "query_generator", "embedder"):
            try:
                bound.add(str(self.role(role)))
            except Exception:  # noqa: BLE001 - an unset role
                pass
        return bound

    def hash(self, *sections: str) -> str:
        """Stable short hash of the named sections (for unit keys of config-dependent work)."""
        payload = {s: self.get(s, None) for s in sections}
        blob = json.dumps(payload, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def full_hash(self) -> str:
        """Hash of the whole effective config (every section): what a router training and an
        export record of the settings they ran with."""
        return self.hash(*sorted(self.data))

    # --- validation ----------------------------------------------------------------------
    def check_types(self) -> None:
        """Unknown keys and values of the wrong type, against configs/default.yaml's shape."""
        try:
            schema().model_validate(self.data)
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = tuple(err["loc"])
            node: Any = self.data  # drop pydantic's union tags ('float', 'list[str]') from the path
            for n, part in enumerate(loc):
                if isinstance(node, dict) and part in node:
                    node = node[part]
                elif err["type"] != "extra_forbidden":
                    loc = loc[:n]
                    break
            dotted = ".".join(map(str, loc))
            where = self.where(dotted)
            if err["type"] == "extra_forbidden":
                known = _known_keys(loc)
                close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]}?)" if close else (
                    f" (known here: {', '.join(known[:12])}{', ...' if len(known) > 12 else ''})" if known else "")
                raise ConfigError(f"{where}: unknown setting '{dotted}'{hint}") from None
            value = err.get("input")
            shown = repr(value) if not isinstance(value, (dict, list)) else type(value).__name__
            raise ConfigError(f"{where}: setting '{dotted}' has the wrong type: {err['msg'].lower()} "
                              f"(got {shown})") from None

    def validate(self) -> None:
        """Backends, roles and the range of every numeric setting (:data:`RANGES`), each bad
        value named with where it came from (file and line, or the environment variable)."""
        backends = self.data.get("backends") or {}
        if not isinstance(backends, dict):
            raise ConfigError(f"{self.where('backends')}: 'backends' must be a mapping")
        for name, spec in backends.items():
            where = f"{self.where(f'backends.{name}')}: backends.{name}"
            if not isinstance(spec, dict):
                raise ConfigError(f"{where} must be a mapping")
            kind = spec.get("kind")
            if kind not in BACKEND_KINDS:
                raise ConfigError(f"{self.where(f'backends.{name}.kind')}: backends.{name}.kind must be one of "
                                  f"{', '.join(BACKEND_KINDS)} (got {kind!r})")
            if not spec.get("model"):
                raise ConfigError(f"{where}.model is missing")
            if "api_key" in spec:
                raise ConfigError(f"{self.where(f'backends.{name}.api_key')}: backends.{name}.api_key: never put "
                                  "a key in the config; set api_key_env to the name of the environment variable "
                                  "that holds it")
            if kind == "openai":
                self._check_base_url(name, spec.get("base_url"))
            for key in ("extra_body", "headers"):
                if spec.get(key) is not None and not isinstance(spec[key], dict):
                    raise ConfigError(f"{self.where(f'backends.{name}.{key}')}: backends.{name}.{key} must be a "
                                      f"mapping (got {spec[key]!r})")
            self._check_prices(name, spec)
        self._check_ranges(self.data, "")
        roles = self.data.get("roles") or {}
        for role, value in roles.items():
            if role not in ROLES:
                raise ConfigError(f"{self.where(f'roles.{role}')}: roles.{role} is not a role ({', '.join(ROLES)})")
            names = value if isinstance(value, list) else [value]
            for name in names:
                if name not in backends:
                    raise ConfigError(f"{self.where(f'roles.{role}')}: roles.{role} names backend '{name}', "
                                      "which is not defined under 'backends'")
        window, overlap = self.get("chunking.window", None), self.get("chunking.overlap", None)
        if isinstance(window, int) and isinstance(overlap, int) and overlap >= window:
            raise ConfigError(f"{self.where('chunking.overlap')}: setting 'chunking.overlap' must be smaller than "
                              f"chunking.window ({window}) (got {overlap})")

    def _check_base_url(self, name: str, url: Any) -> None:
        from urllib.parse import urlsplit

        where = f"{self.where(f'backends.{name}.base_url')}: backends.{name}.base_url"
        if not url:
            raise ConfigError(f"{where} is missing")
        try:
            parts = urlsplit(str(url))
            parts.port  # noqa: B018 - a malformed port raises here
        except ValueError as exc:
            raise ConfigError(f"{where} is not a URL ({exc}): {url!r}") from None
        if not isinstance(url, str) or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{where} must be an http:// or https:// URL with a host (got {url!r})")

    def _check_prices(self, name: str, spec: dict) -> None:
        try:
            parse_prices(name, spec, self.where(f"backends.{name}.price_per_million"))
        except PriceError as exc:
            raise ConfigError(str(exc)) from None

    def _check_ranges(self, node: Any, prefix: str) -> None:
        if not isinstance(node, dict):
            return
        for key, value in node.items():
            dotted = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, dict):
                if key not in _OPAQUE:
                    self._check_ranges(value, dotted)
                continue
            bounds = RANGES.get(str(key))
            if bounds is None or value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            lo, hi, lo_ok = bounds
            if (lo is not None and (value < lo or (value == lo and not lo_ok))) or (hi is not None and value > hi):
                raise ConfigError(f"{self.where(dotted)}: setting '{dotted}' must be {_range_text(lo, hi, lo_ok)} "
                                  f"(got {value!r})")
