"""``python -m actors.platforms.tui chat|attach ...``: the same commands as ``hermes chat`` / ``hermes attach``."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from ._cli import add_parsers


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hermes", description="The terminal UI of the agent runtime.")
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    add_parsers(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
