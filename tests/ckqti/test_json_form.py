"""json_ready and json_text: what --json prints is JSON every parser reads."""

from __future__ import annotations

import json

import numpy as np

from ckqti.json_form import json_ready, json_text


def refuse(token):
    raise ValueError(f"not JSON: a bare {token}")


def test_numbers_that_are_not_finite_are_null_at_any_depth_and_the_rest_unchanged():
    value = {"a": float("nan"), "b": [1, 2.5, float("inf")], "c": ({"d": -float("inf"), "e": "NaN"},),
             "f": np.float64("nan"), "g": True, "h": None, "i": -0.0, "j": 1e308}
    want = {"a": None, "b": [1, 2.5, None], "c": [{"d": None, "e": "NaN"}], "f": None, "g": True, "h": None,
            "i": -0.0, "j": 1e308}
    assert json_ready(value) == want
    text = json_text(value)
    assert "\n" not in text and json.loads(text, parse_constant=refuse) == want
    assert json.loads(json.dumps(value), parse_constant=lambda t: t)["a"] == "NaN"  # what json.dumps alone wrote
