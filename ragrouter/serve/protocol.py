"""What ``serve`` takes of an OpenAI chat-completions request, and how it refuses the rest.

:func:`parse_body` turns the raw body into a JSON object or refuses it with one OpenAI-shaped
400 naming the field: bytes that are not UTF-8, text that is not JSON (or nested past what the
parser takes), a string holding a NUL character or a lone surrogate (no store can hold either:
PostgreSQL refuses NUL, and a question stored with one could not be exported for ``ingest``).

:func:`chat_request` reads the fields OpenAI documents for ``POST /v1/chat/completions``
(:data:`FIELDS` says, for each, what ``serve`` does with it — the README's table is made from
the same list):

* honoured: ``model``, ``messages`` (the last user message is the question), ``stream``,
  ``stream_options.include_usage``, ``max_tokens`` / ``max_completion_tokens``,
  ``temperature``, ``stop`` (a string or up to 4), ``seed`` — the last four go to the
  generator's answer calls and into the stored run's configuration hash;
  ``response_format`` of type ``text``; ``n`` = 1; ``tool_choice`` ``none``; ``user`` and
  ``metadata`` are accepted and ignored (they change no answer);
* refused with a 400 naming the field: ``n`` > 1, ``tools`` / ``functions`` (and a
  ``tool_choice`` that is not ``none``), ``response_format`` other than ``text``,
  ``logprobs`` true, ``audio`` / ``modalities`` other than text;
* any other field is ignored (the generator's own sampling settings stand).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass


class ServeError(Exception):
    def __init__(self, status: int, message: str, type_: str, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type_, code, param


def error_body(message: str, type_: str, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ServeError:
    return ServeError(400, message, "invalid_request_error", code=code, param=param)


# (field, what serve does with it): the README's protocol table
FIELDS: tuple[tuple[str, str], ...] = (
    ("model", "honoured: `ragrouter/<corpus>` or the corpus name; unknown → 404 `model_not_found`"),
    ("messages", "honoured: the last user message is the question (text parts of list content)"),
    ("stream", "honoured: server-sent `chat.completion.chunk` events, then `[DONE]`"),
    ("stream_options.include_usage", "honoured: every chunk has `usage: null`, a last chunk has `choices: []` "
     "and the usage"),
    ("max_tokens / max_completion_tokens", "honoured: the answer calls' cap; a cut answer ends with "
     "`finish_reason: \"length\"`; part of the run's config hash"),
    ("temperature", "honoured: the answer calls' temperature (0–2); part of the run's config hash"),
    ("stop", "honoured: a string or up to 4, sent with the answer calls; part of the run's config hash"),
    ("seed", "honoured: sent with the answer calls; part of the run's config hash"),
    ("response_format", "`{\"type\": \"text\"}` honoured; `json_object` / `json_schema` → 400"),
    ("n", "1 honoured; more → 400 naming `n`"),
    ("tools / functions", "→ 400 naming the field (no tool calls); `tool_choice` other than `none` → 400"),
    ("logprobs", "`false` honoured; `true` → 400 (`logprobs` is always null)"),
    ("modalities / audio", "text only; anything else → 400"),
    ("user, metadata, store", "accepted, ignored (no answer depends on them)"),
    ("top_p, presence_penalty, frequency_penalty, logit_bias, top_logprobs, …", "ignored: the generator's "
     "configured sampling stands"),
)

_MAX_JSON_DEPTH = 64  # a real request is a few levels deep; deeper is refused before it is walked


def _bad_string(value: str) -> str | None:
    nul = value.find("\x00")
    if nul >= 0:
        return f"holds a NUL character (\\u0000) at character {nul}"
    for i, ch in enumerate(value):
        if "\ud800" <= ch <= "\udfff":
            return f"holds a lone surrogate (\\u{ord(ch):04x}) at character {i}: not valid Unicode"
    return None


def _check_strings(body) -> None:
    """Refuse the first string (value or key) no store can hold, naming where it is."""
    stack: list[tuple[object, str, int]] = [(body, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > _MAX_JSON_DEPTH:
            raise bad_request(f"the body is nested more than {_MAX_JSON_DEPTH} levels deep", param=path or None)
        if isinstance(value, str):
            why = _bad_string(value) if ("\x00" in value or not value.isascii()) else None
            if why:
                raise bad_request(f"'{path}' {why}", param=path)
        elif isinstance(value, dict):
            for k, v in reversed(list(value.items())):
                where = f"{path}.{k}" if path else str(k)
                why = _bad_string(k) if not k.isascii() or "\x00" in k else None
                if why:
                    raise bad_request(f"a key of '{path or 'the body'}' {why}", param=path or None)
                stack.append((v, where, depth + 1))
        elif isinstance(value, list):
            for i in range(len(value) - 1, -1, -1):
                stack.append((value[i], f"{path}[{i}]", depth + 1))


def parse_body(raw: bytes) -> dict:
    """The request body as a JSON object, or a 400 naming what is wrong (see the module doc)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(f"the body is not valid UTF-8 (byte {exc.start}: {exc.reason})") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad_request(f"the body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise bad_request("the body is nested too deeply") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    _check_strings(body)
    return body


@dataclass(frozen=True)
class ChatRequest:
    """The fields of a chat request that ``serve`` acts on (see the module doc)."""

    model: object
    question: str
    stream: bool = False
    include_usage: bool = False
    query_type: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def sampling(self) -> dict:
        """The generation parameters a client set (for ``Settings.for_answer``)."""
        return {"max_tokens": self.max_tokens, "temperature": self.temperature, "stop": self.stop or None,
                "seed": self.seed}


def _question(body: dict) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty list", param="messages")
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if not isinstance(m, dict):
            raise bad_request("each message must be an object", param=f"messages[{i}]")
        if m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, list):  # content parts: the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if not isinstance(content, str) or not content.strip():
            raise bad_request("the last user message has no text", param=f"messages[{i}].content")
        return content.strip()
    raise bad_request("no user message to answer", param="messages")


def _int(body: dict, name: str, lo: int | None = None) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (lo is not None and value < lo):
        raise bad_request(f"'{name}' must be an integer{f' >= {lo}' if lo is not None else ''} (got {value!r})",
                          param=name)
    return value


def _refusals(body: dict) -> None:
    n = body.get("n")
    if n is not None and n != 1:
        raise bad_request(f"'n' = {n!r}: serve answers with one choice (n = 1)", param="n")
    for name in ("tools", "functions"):
        if body.get(name):
            raise bad_request(f"'{name}' is not supported: serve answers in text and calls no tools", param=name)
    choice = body.get("tool_choice")
    if choice is not None and choice != "none":
        raise bad_request("'tool_choice' is not supported: serve calls no tools", param="tool_choice")
    fmt = body.get("response_format")
    if fmt is not None:
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind != "text":
            raise bad_request(f"'response_format' of type {kind!r} is not supported: serve answers in text "
                              "({\"type\": \"text\"})", param="response_format")
    if body.get("logprobs"):
        raise bad_request("'logprobs' is not supported (always null)", param="logprobs")
    modalities = body.get("modalities")
    if modalities is not None and modalities != ["text"]:
        raise bad_request("'modalities' other than [\"text\"] are not supported", param="modalities")
    if body.get("audio") is not None:
        raise bad_request("'audio' is not supported: serve answers in text", param="audio")


def chat_request(body: dict, query_types: tuple[str, ...] = ()) -> ChatRequest:
    """The :class:`ChatRequest` of a parsed body, or a 400 naming the first bad field."""
    _refusals(body)
    question = _question(body)
    stream = body.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise bad_request("'stream' must be true or false", param="stream")
    opts = body.get("stream_options")
    if opts is not None and not isinstance(opts, dict):
        raise bad_request("'stream_options' must be an object", param="stream_options")
    include_usage = (opts or {}).get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise bad_request("'stream_options.include_usage' must be true or false",
                          param="stream_options.include_usage")
    if opts is not None and not stream:
        raise bad_request("'stream_options' is only allowed with 'stream': true", param="stream_options")
    query_type = body.get("query_type")
    if query_type is not None and (not isinstance(query_type, str) or (query_types and query_type not in query_types)):
        raise bad_request(f"'query_type' must be one of {', '.join(query_types) or 'the store types'}",
                          param="query_type")
    cap = _int(body, "max_completion_tokens", 1)
    legacy = _int(body, "max_tokens", 1)
    if cap is not None and legacy is not None and cap != legacy:
        raise bad_request("'max_tokens' and 'max_completion_tokens' differ: send one", param="max_tokens")
    temperature = body.get("temperature")
    if temperature is not None and (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
                                    or not math.isfinite(temperature) or not 0 <= temperature <= 2):
        raise bad_request(f"'temperature' must be a number between 0 and 2 (got {temperature!r})",
                          param="temperature")
    stop = body.get("stop")
    if stop is None:
        stops: tuple[str, ...] = ()
    elif isinstance(stop, str):
        stops = (stop,) if stop else ()
    elif isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) for s in stop):
        stops = tuple(s for s in stop if s)
    else:
        raise bad_request("'stop' must be a string or a list of up to 4 strings", param="stop")
    return ChatRequest(model=body.get("model"), question=question, stream=stream, include_usage=include_usage,
                       query_type=query_type, max_tokens=cap if cap is not None else legacy,
                       temperature=None if temperature is None else float(temperature), stop=stops,
                       seed=_int(body, "seed"))
