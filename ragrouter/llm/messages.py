"""Small pure helpers the gateway uses to shape a chat request and read a reply's size
(kept apart so :mod:`ragrouter.llm.gateway` stays one screenful of logic)."""

from __future__ import annotations


def reply_tokens(reply) -> int | None:
    """Tokens a reply reports (prompt + completion), None when the endpoint gave no usage."""
    p = getattr(reply, "prompt_tokens", None)
    c = getattr(reply, "completion_tokens", 0) or 0
    return None if p is None else int(p) + int(c)


def text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def schema_name(schema: dict) -> str:
    raw = str(schema.get("title") or "response")
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in raw)[:64]
    return name or "response"


def with_instructions(messages: list[dict], instructions: str) -> list[dict]:
    """Messages with the JSON instructions appended to the system prompt (or a new one)."""
    if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
        first = dict(messages[0])
        first["content"] = f"{first['content']}\n\n{instructions}"
        return [first, *messages[1:]]
    return [{"role": "system", "content": instructions}, *messages]
