"""ckqti.errors: the one-line user errors, and the checks of option values shared by the CLI and the Python API."""

import enum
from fractions import Fraction

import numpy as np
import pytest

from ckqti.errors import CkqtiError, OptionError, all_ids, id_text, is_id, is_real, option_count


def test_is_real_takes_any_real_number_but_a_bool():
    assert all(is_real(x) for x in (1, 0.5, np.float32(0.5), np.int64(2), Fraction(1, 2), float("nan")))
    assert not any(is_real(x) for x in (True, False, None, "0.5", 1j, [1]))


def test_an_error_is_one_line_naming_the_file_and_the_line_where_known():
    assert str(CkqtiError("bad tab", "q.tsv", 3)) == "q.tsv:3: bad tab"
    assert str(CkqtiError("bad tab", "q.tsv")) == "q.tsv: bad tab"
    assert str(CkqtiError("two\nlines")) == "two lines"


def test_an_option_becomes_its_flag_where_it_first_appears_only():
    err = OptionError("max_steps must be set; max_steps is an integer", ("max_steps",))
    assert err.as_flags() == "--max-steps must be set; max_steps is an integer"


def test_an_option_count_is_an_integer_of_at_least_its_least_value():
    assert option_count(1, "epochs") == 1 and option_count(0, "seed", 0) == 0
    assert type(option_count(np.int64(2), "epochs", 2)) is int
    for bad, least in ((0, 1), (1, 2), (True, 1), (1.0, 1), ("2", 1)):
        with pytest.raises(OptionError, match="epochs must be an integer >= "):
            option_count(bad, "epochs", least)


class Code(int, enum.Enum):
    """An integer whose ``str`` is not its digits (``'Code.SEVEN'``)."""
    SEVEN = 7


def test_an_id_in_memory_is_a_string_or_an_integer_read_as_text_its_digits():
    ids = ("d1", np.str_("d1"), 7, np.int64(7), np.uint8(7), Code.SEVEN)
    assert all(is_id(x) for x in ids) and all_ids(ids)
    assert not any(is_id(x) for x in (True, 7.0, None, b"d1", ("d1",)))
    assert not all_ids(["d1", 7, False]) and not all_ids([7, 1.0])
    assert [id_text(x) for x in ids] == ["d1", "d1", "7", "7", "7", "7"]  # an integer as its digits, not its str
    assert all(type(id_text(x)) is str for x in ids)  # numpy's str_ as str
