"""ckqti.errors: the checks of option values shared by the CLI and the Python API."""

from fractions import Fraction

import numpy as np

from ckqti.errors import is_real


def test_is_real_takes_any_real_number_but_a_bool():
    assert all(is_real(x) for x in (1, 0.5, np.float32(0.5), np.int64(2), Fraction(1, 2), float("nan")))
    assert not any(is_real(x) for x in (True, False, None, "0.5", 1j, [1]))
