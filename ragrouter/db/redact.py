"""What is recorded of a process never holds a password: redaction of URLs, DSNs and command lines."""

from __future__ import annotations

import os
import re

_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*):\S*@", re.I)  # to the last @: a password may hold one
_KEY_PASSWORD = re.compile(r"\b(password|passwd|pwd)(\s*=\s*)('[^']*'|[^\s&;]+)", re.I)


def redact_secrets(text: str) -> str:
    """``text`` with every password of a URL (``scheme://user:PASSWORD@host``) or of a
    ``password=…`` pair (libpq DSNs, URL query strings) replaced by ``***``: what is recorded
    — worker runs, the progress file, messages — never holds one."""
    return _KEY_PASSWORD.sub(r"\1\2***", _URL_PASSWORD.sub(r"\1:***@", text))


def command_line(argv: list[str] | None = None) -> str:
    """This process' command line as it is recorded (program base name, secrets redacted)."""
    import sys

    argv = sys.argv if argv is None else argv
    return " ".join(os.path.basename(a) if i == 0 else redact_secrets(a) for i, a in enumerate(argv))
