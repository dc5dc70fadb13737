"""DICOM decimal strings (DS) parsed in bulk, each value exactly as ``float()`` parses it.

An RTSTRUCT holds its contours as hundreds of thousands of decimal strings; parsed one by one
they took longer than reading the image series. :func:`parse_decimals` parses a whole
multi-valued string at once with ``numpy.fromstring`` (in C; each value by Python's own
correctly rounded conversion, so the same double as ``float()``), and returns None when a
value is not a number, for the caller to name it.
"""

from __future__ import annotations

import warnings

import numpy as np


def parse_decimals(raw: bytes) -> np.ndarray | None:
    """The numbers of a multi-valued decimal string (values split by backslashes), each the
    double ``float()`` gives it; None unless every value is a number.

    Args:
        raw: the element's bytes, as in the file (trailing space or NUL padding allowed).

    Returns:
        The float64 values in order, or None.
    """
    text = raw.strip(b" \0")
    if not text:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns, and stops, at a value it cannot parse
        try:
            values = np.fromstring(text, dtype=float, sep="\\")
        except (ValueError, DeprecationWarning):
            return None
    return values if values.size == text.count(b"\\") + 1 else None
