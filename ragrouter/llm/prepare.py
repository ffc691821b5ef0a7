"""A chat or embedding request as the gateway checks and keys it, before anything is sent.

:func:`prepare_chat` validates the arguments of :meth:`ragrouter.llm.gateway.Gateway.chat`,
builds the cache key (:func:`ragrouter.llm.ledger.chat_key`, plus the backend's request
settings when set) and the messages and ``response_format`` actually sent for the backend's
structured-output mode:

``json_schema``  the schema goes in ``response_format`` (strict when ``strict_schema``).
``json_object``  the schema's instructions are appended to the messages, ``response_format``
                 is ``json_object``, and "Answer in JSON." is added when no message says
                 "json" (OpenAI and DeepSeek reject the mode otherwise).
``none``         the instructions only.

Every problem is a ``GatewayError('bad_request' | 'config')``.
"""

from __future__ import annotations

from ragrouter.llm.errors import GatewayError
from ragrouter.llm.jsonparse import schema_instructions
from ragrouter.llm.ledger import chat_key, request_hash
from ragrouter.llm.messages import schema_name, text_of, with_instructions
from ragrouter.llm.tokens import message_tokens


def check_messages(messages) -> list[dict]:
    """``messages`` if it is a non-empty list of {'role', 'content'} dicts."""
    if not isinstance(messages, list) or not messages:
        raise GatewayError("bad_request", "messages must be a non-empty list of {'role', 'content'} dicts")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or "content" not in m:
            raise GatewayError("bad_request", f"message #{i} must be a dict with 'role' and 'content'")
    return messages


def check_texts(texts) -> list[str]:
    """``texts`` as a list if it is a list or tuple of strings."""
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
        raise GatewayError("bad_request", "texts must be a list of strings")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise GatewayError("bad_request", f"text #{i} is {type(t).__name__}, not str")
    return list(texts)


def check_timeout(be, timeout_s: float | None, messages=None, max_tokens: int = 0) -> float:
    """The timeout of one attempt: ``timeout_s`` when given, else the backend's — for a local
    model's chat call, scaled to the call's size and the model's speed (``call_timeout``)."""
    if timeout_s is None:
        if messages is not None and hasattr(be, "call_timeout"):
            return float(be.call_timeout(message_tokens(messages), max_tokens))
        return be.timeout_s
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise GatewayError("bad_request", f"timeout_s must be a positive number (got {timeout_s!r})")
    return float(timeout_s)


def prepare_chat(be, messages, temperature, max_tokens, json_schema, sample, stop=None, seed=None):
    """(messages as sent, cache key, request hash, response_format) of a chat request to the
    backend object ``be``; ``stop`` (up to 4 non-empty strings) and ``seed`` (an integer) enter
    the key only when given, so the hashes of other requests stay what they were."""
    if not be.supports_chat:
        raise GatewayError("config", f"backend '{be.name}' ({be.kind}) does not serve chat", backend=be.name)
    messages = check_messages(messages)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or temperature < 0:
        raise GatewayError("bad_request", f"temperature must be a number >= 0 (got {temperature!r})")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise GatewayError("bad_request", f"max_tokens must be a positive integer (got {max_tokens!r})")
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 0:
        raise GatewayError("bad_request", f"sample must be an integer >= 0 (got {sample!r})")
    if json_schema is not None and not isinstance(json_schema, dict):
        raise GatewayError("bad_request", "json_schema must be a dict (a JSON Schema) or None")
    if stop is not None and (not isinstance(stop, (list, tuple)) or not 0 < len(stop) <= 4
                             or not all(isinstance(s, str) and s for s in stop)):
        raise GatewayError("bad_request", f"stop must be 1 to 4 non-empty strings (got {stop!r})")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise GatewayError("bad_request", f"seed must be an integer (got {seed!r})")
    mode = be.structured_output if json_schema is not None else None
    key = chat_key(be.model, messages, temperature=temperature, max_tokens=max_tokens, structured=mode,
                   json_schema=json_schema, sample=sample)
    if stop is not None:
        key["stop"] = list(stop)
    if seed is not None:
        key["seed"] = int(seed)
    settings = be.request_settings() if hasattr(be, "request_settings") else {}
    if settings:  # only when set: hashes of plain requests stay what they were
        key["settings"] = settings
    try:
        h = request_hash(key)
    except (TypeError, ValueError) as exc:
        raise GatewayError("bad_request", f"messages/json_schema are not JSON-serialisable: {exc}") from None
    sent, response_format = messages, None
    if json_schema is not None:
        if mode == "json_schema":
            response_format = {"type": "json_schema",
                               "json_schema": {"name": schema_name(json_schema), "schema": json_schema,
                                               "strict": bool(be.spec.get("strict_schema", False))}}
        else:
            sent = with_instructions(messages, schema_instructions(json_schema))
            if mode == "json_object":
                response_format = {"type": "json_object"}
                if not any("json" in text_of(m).lower() for m in sent):
                    # OpenAI and DeepSeek reject json_object unless a message says "json"
                    sent = with_instructions(sent, "Answer in JSON.")
    return sent, key, h, response_format
