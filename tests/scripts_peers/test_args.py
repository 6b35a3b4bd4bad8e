"""The scripts' shared argument types: counts are integers >= 1, model lists name known models."""

from __future__ import annotations

import argparse

import pytest

from scripts.args import names_from, positive_int


def test_positive_int_refuses_zero_negatives_and_words():
    assert positive_int("3") == 3
    for bad in ("0", "-1", "2.5", "many"):
        with pytest.raises(argparse.ArgumentTypeError, match="integer >= 1"):
            positive_int(bad)


def test_names_are_matched_in_any_case_and_unknown_ones_refused():
    parse = names_from(("TK", "TKL", "NDRM3"))
    assert parse("tk, NDRM3") == ["TK", "NDRM3"]
    for bad in ("tk,bogus", "", ","):
        with pytest.raises(argparse.ArgumentTypeError, match="expected names from TK, TKL, NDRM3"):
            parse(bad)
