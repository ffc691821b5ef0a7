"""A paid reply made into what the ledger keeps (:mod:`ragrouter.llm.gateway` calls these).

A reply must pass its checks before it is stored: a chat reply has content, and a structured
one parses against its schema (:mod:`ragrouter.llm.jsonparse`); embeddings are finite, one row
per input, and are stored unit-length. Its tokens are the endpoint's ``usage`` when it reports
them, else cl100k_base counts (``'tiktoken'``; a local encoder's own counts are ``'encoder'``).
A reply that fails a check raises :class:`Rejected`, which the gateway records as the call's
failure with the tokens it billed.
"""

from __future__ import annotations

import numpy as np

from ragrouter.llm import tokens
from ragrouter.llm.errors import ChatReply, EmbedReply
from ragrouter.llm.jsonparse import JSONParseError, parse_reply
from ragrouter.llm.ledger import _Record, message_tokens


class Rejected(Exception):
    """A paid reply that cannot be kept: the failure's ``reason`` and ``detail``, and what the
    call billed (``billed``: the failure row's response and token fields)."""

    def __init__(self, reason: str, detail: str, **billed):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail, self.billed = reason, detail, billed


def chat_record(reply: ChatReply, sent: list[dict], json_schema: dict | None, key: dict, temperature: float,
                max_tokens: int, sampling: dict | None, latency: float, attempts: int) -> tuple[_Record, dict]:
    """(record, ledger row fields) of a chat reply to the messages ``sent`` under cache ``key``."""
    text_out = reply.text
    if reply.prompt_tokens is not None and reply.completion_tokens is not None:
        p_tok, c_tok, source = reply.prompt_tokens, reply.completion_tokens, "usage"
    else:
        p_tok, c_tok, source = message_tokens(sent), tokens.count(text_out or ""), "tiktoken"
    billed = {"response": text_out, "prompt_tokens": p_tok, "completion_tokens": c_tok,
              "reasoning_tokens": reply.reasoning_tokens}
    data = None
    if text_out is None or not text_out.strip():
        why = f"the model refused: {reply.refusal}" if reply.refusal else "the reply has no content"
        raise Rejected("empty_content", why, **billed)
    if json_schema is not None:
        try:
            data = parse_reply(text_out, json_schema)
        except JSONParseError as exc:
            detail = exc.detail + (" (reply cut at max_tokens)" if reply.finish_reason == "length" else "")
            raise Rejected(exc.reason, detail, **billed) from exc
    params = {"temperature": float(temperature), "max_tokens": int(max_tokens),
              "response_format": key["response_format"], "sample": key["sample"],
              "finish_reason": reply.finish_reason, **(sampling or {})}
    if key.get("settings"):
        params["settings"] = key["settings"]
    if reply.cached_prompt_tokens:
        params["cached_prompt_tokens"] = int(reply.cached_prompt_tokens)  # priced at cached_input
    rec = _Record(id=None, text=text_out, data=data, vectors=None, prompt_tokens=int(p_tok),
                  completion_tokens=int(c_tok), token_source=source, latency_s=latency, attempts=attempts,
                  finish_reason=reply.finish_reason)
    row = {"kind": "chat", "messages": sent, "params": params, "response": text_out, "response_json": data,
           "response_vectors": None, "reasoning_tokens": reply.reasoning_tokens}  # part of c_tok already
    return rec, row


def embed_record(reply: EmbedReply, batch: list[str], http: bool, dimensions, latency: float,
                 attempts: int) -> tuple[_Record, dict]:
    """(record, ledger row fields) of the embeddings of ``batch`` (an ``http`` endpoint's or a
    local encoder's), rows scaled to unit length."""
    vecs = np.asarray(reply.vectors, dtype=np.float32)
    p_tok = reply.prompt_tokens
    source = "encoder" if not http else "usage"
    if p_tok is None:
        p_tok, source = sum(tokens.count(t) for t in batch), "tiktoken"
    if vecs.ndim != 2 or vecs.shape[0] != len(batch) or vecs.shape[1] < 1 or not np.isfinite(vecs).all():
        raise Rejected("bad_response", f"embeddings of shape {vecs.shape} (finite: {bool(np.isfinite(vecs).all())}) "
                       f"for {len(batch)} inputs", prompt_tokens=p_tok, completion_tokens=0)
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    vecs = np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0).astype("<f4")
    rec = _Record(id=None, text=None, data=None, vectors=vecs.tobytes(), prompt_tokens=int(p_tok),
                  completion_tokens=0, token_source=source, latency_s=latency, attempts=attempts)
    row = {"kind": "embedding", "messages": batch,
           "params": {"dimensions": dimensions, "dim": int(vecs.shape[1]), "n": len(batch)},
           "response": None, "response_json": None, "response_vectors": rec.vectors, "reasoning_tokens": None}
    return rec, row
