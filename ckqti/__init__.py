"""ckqti: full-retrieval neural search with a learned, impact-ordered inverted index."""

__version__ = "0.1.0"
