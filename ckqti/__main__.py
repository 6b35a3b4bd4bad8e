"""``python -m ckqti``: the same command line as ``ckqti``."""

from ckqti.cli import main

if __name__ == "__main__":
    main()
