"""Backend kinds by config ``kind``: a plain dict registry (add a kind here and to
``config.BACKEND_KINDS``) and :func:`make_backend`."""

from __future__ import annotations

from ragrouter.llm.backends import Backend, OpenAIBackend
from ragrouter.llm.errors import GatewayError
from ragrouter.llm.local_backends import LocalBackend, LocalEncoderBackend

# kind → class. Add a kind here (and to config.BACKEND_KINDS).
BACKENDS: dict[str, type[Backend]] = {
    "openai": OpenAIBackend,
    "local": LocalBackend,
    "local-encoder": LocalEncoderBackend,
}


def make_backend(name: str, spec: dict, *, source: str = "config") -> Backend:
    """Build the backend ``name`` from its config mapping (GatewayError 'config' when invalid)."""
    kind = spec.get("kind")
    cls = BACKENDS.get(kind)
    if cls is None:
        raise GatewayError("config", f"{source}: backends.{name}.kind must be one of {', '.join(BACKENDS)} "
                           f"(got {kind!r})", backend=name)
    return cls(name, spec, source=source)
