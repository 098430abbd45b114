"""Variables, labels and the checked readers of a program file's JSON fields
(:mod:`tpcore.programs.values`): every refusal names the value and the place."""

from __future__ import annotations

import numpy as np
import pytest

from tpcore.errors import TpcoreError
from tpcore.programs.values import (
    LIMITS,
    Scope,
    Variable,
    check_label,
    check_size,
    check_variable_name,
    need,
    read_labels,
    read_numbers,
)


def test_a_variable_finds_its_labels_and_names_a_missing_one():
    v = Variable("colour", "categorical", ("red", "green", 3))
    assert v.size == 3 and v.index("green") == 1 and v.index(3) == 2
    with pytest.raises(TpcoreError, match=r"value 'blue' is not a value of variable 'colour' "
                                          r"\(values: \['red', 'green', 3\]\)"):
        v.index("blue")
    with pytest.raises(TpcoreError, match="is not a value"):
        v.index(["unhashable"])


@pytest.mark.parametrize("var, message", [
    (Variable("x", "ordinal", (1,)), "kind 'ordinal'"),
    (Variable("x", "categorical", ()), "empty value set"),
    (Variable("x", "categorical", ("a", "a")), "repeated labels"),
    (Variable("x", "numerical", (2, 1)), "sorted and distinct numbers"),
    (Variable("x", "numerical", ("1",)), "sorted and distinct numbers"),
])
def test_variable_validation(var, message):
    with pytest.raises(TpcoreError, match=message):
        var.validate()


def test_labels_and_names_are_bounded():
    assert check_label("a", "w") == "a" and check_label(2.5, "w") == 2.5
    for bad, message in (("x" * (LIMITS.label_chars + 1), "characters"),
                         (float("inf"), "not a finite number"), (True, "not a string"),
                         (None, "not a string")):
        with pytest.raises(TpcoreError, match=message):
            check_label(bad, "w")
    with pytest.raises(TpcoreError, match="is a name the generated program uses"):
        check_variable_name("run", "module name")
    with pytest.raises(TpcoreError, match="things: 5 exceeds the limit of 4"):
        check_size(5, 4, "things")


def test_readers_name_the_field():
    assert need({"a": 1}, "a", "here", int) == 1
    with pytest.raises(TpcoreError, match=r"\(here\): missing field .b."):
        need({"a": 1}, "b", "here")
    with pytest.raises(TpcoreError, match="field 'a' must be a string, got int"):
        need({"a": 1}, "a", "here", str)
    with pytest.raises(TpcoreError, match="field 'a' must be a list, got bool"):
        need({"a": True}, "a", "here", list)
    assert read_labels(["a", 1], "v") == ("a", 1)
    with pytest.raises(TpcoreError, match="values must be a list"):
        read_labels("ab", "v")
    assert read_numbers([[1, 2], [3, 4]], "w", 2).shape == (2, 2)
    assert np.array_equal(read_numbers([1, 2.5], "w", 1), [1.0, 2.5])
    for bad, message in (([[1], [2, 3]], "rows of different lengths"),
                         ([[1, True]], "lists of numbers"), ([["1"]], "lists of numbers")):
        with pytest.raises(TpcoreError, match=message):
            read_numbers(bad, "w", 2)


def test_a_scope_defines_each_variable_once_within_the_total_bound():
    scope = Scope()
    scope.add("tokens", "categorical", ("a", "b"))
    scope.add("positions", "categorical", (0, 1, 2))
    assert scope.tokens.size == 2 and scope.max_len == 3
    assert scope.get("tokens", "m").name == "tokens"
    with pytest.raises(TpcoreError, match=r"\(tokens\): variable defined twice"):
        scope.add("tokens", "categorical", ("c",))
    with pytest.raises(TpcoreError, match=r"\(m\): reads .later., which is not defined before it"):
        scope.get("later", "m")
    scope.total = LIMITS.total_values
    with pytest.raises(TpcoreError, match="values of all variables"):
        scope.add("more", "categorical", ("x",))
