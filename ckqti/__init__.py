"""ckqti: full-retrieval neural search with a learned, impact-ordered inverted index."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ckqti")  # pyproject.toml's, the one place it is written
except PackageNotFoundError:  # the source tree on the path without an install
    __version__ = "0+unknown"
