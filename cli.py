#!/usr/bin/env python
"""ragrouter command line. Run `python cli.py --help` (or `ragrouter --help`) for the commands.

A thin entry kept at the top of the clone; the CLI itself is ragrouter/cli.py, the package's
console script, so an installed `ragrouter` needs no file outside the package.
"""

from __future__ import annotations

import sys

from ragrouter.cli import ORDER, PipelineOrder, cli, entry, main  # noqa: F401

if __name__ == "__main__":
    sys.exit(main())
