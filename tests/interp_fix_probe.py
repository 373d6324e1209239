"""The start of a probe of the project's interpreter fixes (`fitness.sandbox.interp_compat`), run in a
subprocess with ``TRITON_INTERPRET=1``: ``--no-fix`` runs the interpreter as Triton ships it."""

from __future__ import annotations

import argparse
import os


def install_unless_no_fix() -> None:
    """Parse the probe's command line and, unless ``--no-fix``, install the fixes as the interpreter worker
    does."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-fix", action="store_true")
    args = ap.parse_args()
    assert os.environ.get("TRITON_INTERPRET") == "1"
    if not args.no_fix:
        from fitness.sandbox.interp_compat import install

        install()
