"""``python -m ckqti.cli``: the same command line as ``ckqti``."""

import sys

from ckqti.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
