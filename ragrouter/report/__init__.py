"""Reports over the store: the paper's tables and figures, Parquet export, example data.

* :mod:`ragrouter.report.data` — views into pandas; :func:`router_dataset` pivots the router
  outcomes for any paradigm set.
* :mod:`ragrouter.report.tables` / :mod:`ragrouter.report.figures` — Markdown tables and PNGs.
* :mod:`ragrouter.report.build` — :func:`build_report` (``cli.py report``).
* :mod:`ragrouter.report.export` — :func:`export_parquet` (``cli.py export``).
* :mod:`ragrouter.report.synthetic` — random consistent store rows (tests, demos).

The SQL the report reads lives in ``queries/views/1*.sql`` and ``2*.sql``.
"""

from __future__ import annotations

__all__ = ["build_report", "export_parquet", "router_dataset"]


def __getattr__(name: str):
    # Lazy: importing the package must not pull in matplotlib/pyarrow.
    if name == "build_report":
        # deferred (start-up): pulls in matplotlib, pandas, sklearn, torch
        from ragrouter.report.build import build_report

        return build_report
    if name == "export_parquet":
        # deferred (start-up): pulls in pandas, sklearn, torch
        from ragrouter.report.export import export_parquet

        return export_parquet
    if name == "router_dataset":
        # deferred (start-up): pulls in pandas, sklearn, torch
        from ragrouter.report.data import router_dataset

        return router_dataset
    raise AttributeError(name)
