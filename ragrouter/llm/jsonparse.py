"""Tolerant JSON parsing and a small JSON-schema validator for model replies.

Models asked for JSON often wrap it in Markdown fences, add a sentence before or after it,
leave a trailing comma, or use Python-style single quotes and ``True``/``None``.
:func:`parse_json` recovers the value from such text in a fixed order of increasingly
permissive steps and raises :class:`JSONParseError` when nothing works:

1. ``json.loads`` of the stripped text;
2. the body of the first ```` ```json ```` (or bare ```` ``` ````) fence;
3. the first balanced ``{...}`` or ``[...]`` block (string-aware bracket matching);
4. that block repaired: trailing commas dropped, single-quoted strings turned into
   double-quoted ones, bare ``True``/``False``/``None`` turned into JSON literals;
5. a reply cut off at max_tokens: its complete elements kept (:func:`salvage_truncated`);
6. the `json-repair <https://pypi.org/project/json-repair/>`_ library as the last resort
   (unquoted keys, ``//`` comments, unescaped inner quotes).

:func:`validate` checks a value with the `jsonschema` library (Draft 2020-12: every keyword,
``maxLength`` and ``pattern`` included — what backends without native structured output
need) and returns the problems as ``"$.path: message"`` strings.
:func:`parse_reply` does both and is what the gateway calls.
"""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair
from jsonschema import exceptions as _js_exceptions
from jsonschema import validators as _js_validators

__all__ = [
    "JSONParseError",
    "parse_json",
    "validate",
    "parse_reply",
    "schema_instructions",
]

MAX_REPAIR_CHARS = 1_000_000
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\r?\n?(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


class JSONParseError(ValueError):
    """A reply holds no usable JSON. ``reason`` is 'empty_content', 'unparseable_json' or
    'schema_mismatch'; ``detail`` says what was wrong."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --------------------------------------------------------------------------- parsing


def _loads(text: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _balanced_block(text: str, openers: str = "{[") -> str | None:
    """The first balanced block of ``text`` opened by one of ``openers`` (strings respected)."""
    for start, ch in enumerate(text):
        if ch in openers:
            break
    else:
        return None
    stack: list[str] = []
    quote: str | None = None
    escape = False
    for i in range(start, len(text)):
        c = text[i]
        if quote:
            if escape:
                escape = False
            elif c == "\\":
                escape = True
            elif c == quote:
                quote = None
            continue
        if c in "\"'":
            # a single quote inside a word (don't, it's) is an apostrophe, not a string
            if c == "'" and i > 0 and text[i - 1].isalnum():
                continue
            quote = c
        elif c in "{[":
            stack.append("}" if c == "{" else "]")
        elif c in "}]":
            if not stack or stack.pop() != c:
                return None
            if not stack:
                return text[start : i + 1]
    return None


def _requote(text: str) -> str:
    """Turn single-quoted strings into JSON strings and Python literals into JSON ones."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':  # copy a double-quoted string verbatim
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif c == "'" and not (i > 0 and text[i - 1].isalnum()):
            j = i + 1
            buf: list[str] = []
            while j < n and not (text[j] == "'" and _closes(text, j)):
                if text[j] == "\\" and j + 1 < n:
                    nxt = text[j + 1]
                    buf.append("'" if nxt == "'" else "\\" + nxt)
                    j += 2
                    continue
                buf.append('\\"' if text[j] == '"' else text[j])
                j += 1
            out.append('"' + "".join(buf) + '"')
            i = j + 1
        elif c.isalpha():
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            out.append({"True": "true", "False": "false", "None": "null"}.get(word, word))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _closes(text: str, j: int) -> bool:
    """Whether the single quote at ``j`` ends a string (an apostrophe is followed by a letter)."""
    k = j + 1
    while k < len(text) and text[k] in " \t\r\n":
        k += 1
    return k >= len(text) or text[k] in ",:}]"


def _repair(text: str) -> str:
    if len(text) > MAX_REPAIR_CHARS:
        return text
    fixed = _requote(text)
    previous = None
    while previous != fixed:  # nested trailing commas: ",]}" needs two passes
        previous, fixed = fixed, _TRAILING_COMMA.sub(r"\1", fixed)
    return fixed


def salvage_truncated(text: str) -> str | None:
    """Close a JSON value cut off mid-way (a reply stopped at max_tokens).

    Keeps everything up to the last value that was complete inside an open array or object
    and closes the brackets still open: ``{"triples": [["a","b","c"], ["d","e`` becomes
    ``{"triples": [["a","b","c"]]}``. Returns None when nothing complete is left."""
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None
    stack: list[str] = []
    in_str = esc = False
    cut: tuple[int, list[str]] | None = None
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
                # a whole string is a complete element only of a shallow list (e.g. a list
                # of names); deeper down, the tuple it belongs to would be cut short
                if stack and stack[-1] == "[" and len(stack) <= 2:
                    cut = (i + 1, list(stack))
            continue
        if ch == '"':
            in_str = True
        elif ch == "," and stack and (stack[-1] == "{" or len(stack) <= 2):
            cut = (i, list(stack))  # everything before the comma is complete
        elif ch in "[{":
            stack.append(ch)
        elif ch in "]}":
            if not stack:
                break
            stack.pop()
            if not stack:
                return text[start:i + 1]
            if stack[-1] == "[":
                cut = (i + 1, list(stack))
    if cut is None:
        return None
    end, open_ = cut
    closing = "".join("]" if c == "[" else "}" for c in reversed(open_))
    return text[start:end] + closing


def parse_json(text: str | None, prefer: str | None = None) -> Any:
    """The JSON value in a model reply (see the module docstring for the steps).

    ``prefer`` ('object' or 'array') makes the block search look for that kind of block
    first, so prose such as "see [1]" before the object does not win.
    Raises :class:`JSONParseError` with reason ``empty_content`` for ``None``/blank text and
    ``unparseable_json`` when no step yields a value.
    """
    if text is None or not text.strip():
        raise JSONParseError("empty_content", "the reply is empty")
    stripped = text.strip()
    ok, value = _loads(stripped)
    if ok:
        return value
    candidates: list[str] = []
    fence = _FENCE.search(stripped)
    if fence:
        candidates.append(fence.group(1).strip())
    openers = {"object": "{", "array": "["}.get(prefer or "", "")
    for source in (candidates[0] if candidates else None, stripped):
        if source:
            for ops in ([openers] if openers else []) + ["{["]:
                block = _balanced_block(source, ops)
                if block:
                    candidates.append(block)
    seen: set[str] = set()
    for cand in candidates:
        if cand in seen or not cand:
            continue
        seen.add(cand)
        ok, value = _loads(cand)
        if ok:
            return value
        ok, value = _loads(_repair(cand))
        if ok:
            return value
    # last resort: the whole text repaired (e.g. a single-quoted dict whose block scan failed)
    ok, value = _loads(_repair(stripped))
    if ok and isinstance(value, (dict, list)):
        return value
    # a reply cut off at max_tokens: keep its complete elements
    salvaged = salvage_truncated(stripped)
    if salvaged:
        ok, value = _loads(_repair(salvaged))
        if ok and isinstance(value, (dict, list)):
            return value
    # last resort: json-repair on the block (or the text): unquoted keys, comments, inner quotes
    # (only on a complete block: a reply cut off mid-way is the salvage's job, which keeps
    # complete elements only, where json-repair would invent the missing end)
    for cand in ([c for c in candidates if c.startswith(("{", "["))] or [stripped])[:2]:
        if _balanced_block(cand) != cand:
            continue
        value = _json_repair(cand)
        if value is not None:
            return value
    preview = stripped[:80].replace("\n", " ")
    raise JSONParseError("unparseable_json", f"no JSON object or array found in reply starting {preview!r}")


def _json_repair(text: str) -> Any:
    """json-repair's reading of ``text``: an object or array holding something, else None."""
    if len(text) > MAX_REPAIR_CHARS or not any(c in text for c in "{["):
        return None
    try:
        value = json_repair.loads(text)
    except (ValueError, RecursionError, TypeError):
        return None
    return value if isinstance(value, (dict, list)) and value else None


# --------------------------------------------------------------------------- validation

_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _path(error) -> str:
    out = "$"
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _message(error) -> list[str]:
    """One jsonschema error in the project's wording (``$.path: message``)."""
    path, kind, inst, want = _path(error), error.validator, error.instance, error.validator_value
    if kind == "type":
        kinds = want if isinstance(want, list) else [want]
        return [f"{path}: expected {' or '.join(kinds)}, got {_type_name(inst)}"]
    if kind == "required" and isinstance(inst, dict):
        return [f"{path}: missing required key {n!r}" for n in want if n not in inst]
    if kind == "enum":
        return [f"{path}: {inst!r} is not one of [{', '.join(repr(x) for x in want)}]"]
    if kind == "const":
        return [f"{path}: must be {want!r}"]
    if kind == "additionalProperties" and want is False and isinstance(inst, dict):
        props = error.schema.get("properties") or {}
        patterns = list((error.schema.get("patternProperties") or {}))
        return [f"{path}: unexpected key {n!r}" for n in inst
                if n not in props and not any(re.search(p, n) for p in patterns)]
    if kind == "minItems":
        return [f"{path}: has {len(inst)} items, fewer than minItems={want}"]
    if kind == "maxItems":
        return [f"{path}: has {len(inst)} items, more than maxItems={want}"]
    if kind in ("anyOf", "oneOf"):
        return [f"{path}: matches none of the {kind} alternatives"]
    if kind == "maxLength" and isinstance(inst, str):
        return [f"{path}: has {len(inst)} characters, more than maxLength={want}"]
    if kind == "minLength" and isinstance(inst, str):
        return [f"{path}: has {len(inst)} characters, fewer than minLength={want}"]
    msg = error.message
    return [f"{path}: {msg if len(msg) <= 200 else msg[:200] + '…'}"]


def validate(value: Any, schema: dict | None, path: str = "$") -> list[str]:
    """Problems of ``value`` against ``schema`` (empty list when it conforms), checked by the
    jsonschema library (the schema's ``$schema`` draft, else Draft 2020-12) — every keyword,
    maxLength, pattern, minimum and the rest included."""
    if not isinstance(schema, dict) or not schema:
        return []
    cls = _js_validators.validator_for(schema, default=_js_validators.Draft202012Validator)
    try:
        errors = sorted(cls(schema).iter_errors(value), key=lambda e: (list(map(str, e.absolute_path)),
                                                                       str(e.validator)))
    except _js_exceptions.SchemaError as exc:  # a broken schema is the caller's bug: say so
        return [f"{path}: invalid schema: {exc.message}"]
    out: list[str] = []
    for error in errors:
        for msg in _message(error):
            msg = path + msg[1:] if path != "$" else msg
            if msg not in out:
                out.append(msg)
    return out


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "integer", float: "number"}.get(
        type(value), type(value).__name__
    )


def parse_reply(text: str | None, schema: dict | None = None) -> Any:
    """Parse a model reply and validate it against ``schema`` (when given).

    Raises :class:`JSONParseError` with reason ``empty_content``, ``unparseable_json`` or
    ``schema_mismatch`` (detail: the first few problems).
    """
    kind = schema.get("type") if isinstance(schema, dict) else None
    value = parse_json(text, prefer=kind if kind in ("object", "array") else None)
    problems = validate(value, schema)
    if problems:
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        raise JSONParseError("schema_mismatch", "; ".join(problems[:3]) + more)
    return value


def schema_instructions(schema: dict) -> str:
    """System-prompt text that asks for JSON matching ``schema`` (for backends without
    native structured output)."""
    return (
        "Reply with a single JSON value and nothing else (no prose, no Markdown fences). "
        "It must conform to this JSON Schema:\n" + json.dumps(schema, sort_keys=True, ensure_ascii=False)
    )
