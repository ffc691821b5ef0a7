"""Provider presets: the backend settings a provider needs, filled in from ``backends.<name>.preset``.

Any key set on the backend itself wins (``extra_body`` is deep-merged over the preset's).
What each provider accepts and ignores, with its documentation as the source, is written down
beside the scripted fake server that plays it (``tests/test_endpoints.py``).

``openai``            chat models: ``json_schema`` structured output, ``max_tokens``.
``openai-reasoning``  o1/o3/o4/gpt-5 models (= ``reasoning: true``): ``max_completion_tokens``
                      with a reasoning allowance (:data:`REASONING_ALLOWANCE`) on top of the
                      visible cap, no ``temperature`` and no ``top_p`` (the API rejects both).
``deepseek``          ``json_object`` (DeepSeek rejects ``json_schema``); the prompt carries the
                      word "json", as its API requires for that mode.
``ollama``            Ollama's native ``/api/chat`` (``chat_api: ollama``) with
                      ``options.num_ctx`` 12,288: its OpenAI-compatible endpoint ignores
                      ``options`` and cuts prompts past the model's 2-4k default context (the
                      paper's 8,000-token budget exceeds it); ``json_schema`` as ``format``.
``vllm``              ``json_schema`` (guided decoding), keyless on a private address.
``llamacpp``          ``json_schema`` (llama.cpp's grammar-constrained output).
"""

from __future__ import annotations

from ragrouter.llm.errors import GatewayError

# OpenAI's reasoning guide: "reserve at least 25,000 tokens for reasoning and outputs" when starting out
REASONING_ALLOWANCE = 25000

# preset name -> the backend settings it implies (explicit backend keys win)
PRESETS: dict[str, dict] = {
    "openai": {"structured_output": "json_schema", "max_tokens_param": "max_tokens"},
    "openai-reasoning": {"structured_output": "json_schema", "reasoning": True,
                         "reasoning_allowance": REASONING_ALLOWANCE},
    "deepseek": {"structured_output": "json_object", "max_tokens_param": "max_tokens"},
    "ollama": {"structured_output": "json_schema", "chat_api": "ollama", "num_ctx": 12288},
    "vllm": {"structured_output": "json_schema"},
    "llamacpp": {"structured_output": "json_schema"},
}


def deep_merge(base: dict, extra: dict) -> dict:
    """``base`` with ``extra`` merged over it, nested mappings merged key by key."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def apply_preset(name: str, spec: dict, *, source: str = "config") -> dict:
    """``spec`` with its ``preset``'s settings filled in (explicit keys win, ``extra_body``
    deep-merged). GatewayError('config') for an unknown preset."""
    preset = spec.get("preset")
    if preset in (None, "", "none"):
        return dict(spec)
    if preset not in PRESETS:
        raise GatewayError("config", f"{source}: backends.{name}.preset must be one of {', '.join(PRESETS)} "
                           f"(got {preset!r})", backend=name)
    out = deep_merge(PRESETS[preset], {k: v for k, v in spec.items() if k != "extra_body"})
    if isinstance(spec.get("extra_body"), dict) or "extra_body" in PRESETS[preset]:
        out["extra_body"] = deep_merge(PRESETS[preset].get("extra_body", {}), spec.get("extra_body") or {})
    return out
