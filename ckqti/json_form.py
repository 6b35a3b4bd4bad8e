"""The JSON that ``--json`` prints for programs: one object a line, valid for every JSON parser.

JSON has no NaN or infinity, but Python's :func:`json.dumps` writes them as bare ``NaN``, ``Infinity``
and ``-Infinity``, which strict parsers (JavaScript's ``JSON.parse``, ``jq``, Go, Rust's serde) refuse:
a number that is not finite is ``null`` here, as ``eval --json`` has always given a p-value that is not
a number (:meth:`ckqti.evaluate.EvalReport.to_dict`).
"""

from __future__ import annotations

import json
import math


def json_ready(value):
    """``value`` (dicts, lists, tuples, strings, numbers, None) with every float that is not finite as None;
    tuples become lists, as JSON reads them back."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    return value


def json_text(value) -> str:
    """``value`` as one line of strict JSON (:func:`json_ready`; ``allow_nan=False`` refuses anything it missed)."""
    return json.dumps(json_ready(value), allow_nan=False)
