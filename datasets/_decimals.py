"""DICOM decimal strings (DS) parsed in bulk, each value exactly as ``float()`` parses it.

An RTSTRUCT holds its contours as hundreds of thousands of decimal strings; parsed one by one
they took longer than reading the image series. :func:`parse_decimals` parses a whole
multi-valued string at once:

* plain decimals (an optional sign, at most 16 digits, at most one point: what DS values
  almost always are) by numpy array arithmetic: the digits make an integer ``M < 2**53`` and
  the value is ``M / 10**F`` for ``F`` digits after the point. Both are exact doubles, so the
  one division is correctly rounded, as ``float()`` is (Clinger's fast path): the same double.
* anything else (exponents, spaces inside, more digits) by ``numpy.fromstring``, in C, which
  parses each value with Python's own correctly rounded conversion;
* None when a value is not a number at all, for the caller to name it.
"""

from __future__ import annotations

import warnings

import numpy as np

#: 10**0 .. 10**16, exact doubles (from Python integers)
_POWERS = np.array([float(10**k) for k in range(17)])
#: byte values
_BACKSLASH, _POINT, _MINUS, _PLUS, _ZERO, _NINE = 92, 46, 45, 43, 48, 57
#: what a byte is: 0 none of these, then digit, point, separator, sign
_DIGIT, _DOT, _SEPARATOR, _SIGN = 1, 2, 3, 4
_KINDS = np.zeros(256, dtype=np.uint8)
_KINDS[_ZERO : _NINE + 1] = _DIGIT
_KINDS[_POINT], _KINDS[_BACKSLASH], _KINDS[_MINUS], _KINDS[_PLUS] = _DOT, _SEPARATOR, _SIGN, _SIGN
#: a digit byte's value as a double
_DIGIT_VALUES = np.arange(256, dtype=float) - _ZERO


def parse_decimals(raw: bytes) -> np.ndarray | None:
    """The numbers of a multi-valued decimal string (values split by backslashes), each the
    double ``float()`` gives it; None unless every value is a number.

    Args:
        raw: the element's bytes, as in the file (trailing space or NUL padding allowed).

    Returns:
        The float64 values in order, or None.
    """
    text = raw.strip(b" \0")
    values = _plain_decimals(text)
    if values is not None:
        return values
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns, and stops, at a value it cannot parse
        try:
            values = np.fromstring(text, dtype=float, sep="\\")
        except (ValueError, DeprecationWarning):
            return None
    return values if values.size == text.count(b"\\") + 1 else None


def _plain_decimals(text: bytes) -> np.ndarray | None:
    """The values of ``text`` when every one is a plain decimal of at most 16 digits whose
    digits make an integer below 2**53; None otherwise."""
    if not text:
        return None
    b = np.frombuffer(text, dtype=np.uint8)
    kind = _KINDS[b]  # one look-up: what each byte is
    if not kind.all():
        return None
    separator = kind == _SEPARATOR
    value = np.cumsum(separator, dtype=np.int32)  # each byte's value (a separator: the next)
    count = int(value[-1]) + 1
    starts = np.concatenate([[0], np.flatnonzero(separator) + 1])
    if starts[-1] >= b.size:  # an empty last value
        return None
    signs = np.flatnonzero(kind >= _SIGN)
    if signs.size and not (separator[signs - 1] | (signs == 0)).all():  # only as a first byte
        return None
    points = np.flatnonzero(kind == _DOT)
    if np.bincount(value[points], minlength=count).max(initial=0) > 1:
        return None
    where = np.flatnonzero(kind == _DIGIT)
    owner = value[where]
    digits = np.bincount(owner, minlength=count)
    if digits.min() < 1 or digits.max() > 16:
        return None
    point_at = np.full(count, b.size, dtype=np.int64)  # no point: no digit after it
    point_at[value[points]] = points
    after = np.bincount(owner[where > point_at[owner]], minlength=count)
    power = np.cumsum(digits, dtype=np.int32)[owner]
    power -= np.arange(1, where.size + 1, dtype=np.int32)  # 0 for a value's last digit
    terms = _DIGIT_VALUES[b[where]] * _POWERS[power]
    mantissa = np.bincount(owner, weights=terms, minlength=count)  # exact below 2**53
    if mantissa.max() >= 2.0**53:
        return None
    result = mantissa / _POWERS[after]
    negative = b[starts] == _MINUS
    result[negative] = -result[negative]
    return result
