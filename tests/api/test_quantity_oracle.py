"""Properties of the Decimal quantity parser against exact rational arithmetic.

The parser replaced the Kubernetes Python client's ``parse_quantity`` (behind our grammar
guard); the commit that introduced it checked, with a property over the same inputs, that
both give the same Decimals.  What stays checked here: every accepted text is the exact
value ``number * base ** power`` rounded once to the context's 28 significant digits (the
client's arithmetic), and what the grammar refuses is refused.
"""

from __future__ import annotations

import re
from decimal import Context, Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_tas.api.quantity import QuantityError, parse_quantity

SUFFIX_FACTOR = {
    "": Fraction(1),
    **{f"{p}i": Fraction(1024) ** i for i, p in enumerate("KMGTPE", start=1)},
    **{
        p: Fraction(1000) ** i
        for p, i in {"n": -3, "u": -2, "m": -1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}.items()
    },
}

digits = st.text(alphabet="0123456789", max_size=40)
numbers = st.builds(
    lambda sign, whole, frac, dot: sign + whole + (dot + frac if dot else ""),
    st.sampled_from(["", "+", "-"]),
    digits,
    digits,
    st.sampled_from(["", "."]),
)
exponents = st.builds(
    lambda e, s, d: e + s + d,
    st.sampled_from(["e", "E"]),
    st.sampled_from(["", "+", "-"]),
    st.text("0123456789", min_size=1, max_size=4),
)
NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


def rounded(exact: Fraction) -> Decimal:
    """``exact`` rounded once to 28 significant digits, half to even (the default context)."""
    ctx = Context(prec=28)
    return ctx.divide(Decimal(exact.numerator), Decimal(exact.denominator))


@settings(max_examples=3000, deadline=None)
@given(numbers, st.sampled_from(sorted(SUFFIX_FACTOR)))
def test_suffixed_number_is_the_rounded_exact_value(number: str, suffix: str) -> None:
    text = number + suffix
    if not NUMBER.fullmatch(number):
        try:
            parse_quantity(text)
        except QuantityError:
            return
        raise AssertionError(f"{text!r} accepted")
    exact = Fraction(number) * SUFFIX_FACTOR[suffix]
    got = parse_quantity(text)
    if suffix:
        assert got == rounded(exact)
    else:
        assert got == exact  # a plain number is read exactly, whatever its length


@settings(max_examples=1000, deadline=None)
@given(numbers, exponents)
def test_exponent_form_is_exact(number: str, exponent: str) -> None:
    text = number + exponent
    if not NUMBER.fullmatch(number):
        try:
            parse_quantity(text)
        except QuantityError:
            return
        raise AssertionError(f"{text!r} accepted")
    assert parse_quantity(text) == Fraction(number) * Fraction(10) ** int(exponent[1:])


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="0123456789.+-eEKMGTPEinumk \n_", max_size=12))
def test_outside_the_grammar_is_refused(text: str) -> None:
    grammar = re.fullmatch(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?", text)
    try:
        parse_quantity(text)
    except QuantityError:
        assert grammar is None
    else:
        assert grammar is not None
