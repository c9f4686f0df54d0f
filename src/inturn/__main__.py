"""``python -m inturn``: the ``inturn`` command line (see `inturn.cli`)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
