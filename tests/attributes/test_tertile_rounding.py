"""Tertiles are not formed from floating-point noise (#70 item 4): a spacing anisotropy of
3.07062 vs 3.07063 is one value, not two groups."""

from __future__ import annotations

import pandas as pd
import pytest

from intrabench.attributes.stratify import tertile_cuts, tertile_cuts_and_note, tertile_group


def test_noise_in_the_fifth_digit_forms_no_groups():
    noisy = pd.Series(
        [3.07062, 3.07063, 3.07062, 3.07063, 3.07061, 3.07064, 3.07062, 3.07063, 3.07062]
    )
    cuts, note = tertile_cuts_and_note(noisy)
    assert cuts is None
    assert note == "fewer than 3 distinct values (at 4 significant digits)"
    assert tertile_group(noisy, cuts).isna().all()


def test_real_differences_still_form_groups_after_rounding():
    values = pd.Series([1.00001, 1.00002, 1.0, 2.0, 2.00001, 2.0, 3.0, 3.00002, 3.0])
    cuts = tertile_cuts(values)
    assert cuts is not None
    assert cuts == pytest.approx((5 / 3, 7 / 3), abs=1e-12)
    assert tertile_group(values, cuts).tolist() == ["low"] * 3 + ["mid"] * 3 + ["high"] * 3
