"""Test ids stay short whatever pytest's version (tests/conftest.py's ``pytest_make_parametrize_id``).

A long string parameter written into a test id reaches ``PYTEST_CURRENT_TEST``, which child processes inherit;
Linux refuses an environment string over 128 KiB (E2BIG), so a subprocess test with such a parameter failed on CI.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import MAX_ID_CHARS, pytest_make_parametrize_id


def test_a_long_string_is_named_by_length_and_digest():
    a = pytest_make_parametrize_id(None, "2" * 131_073, "content")
    b = pytest_make_parametrize_id(None, "2" * 131_072 + "3", "content")
    assert a.startswith("content-131073-") and b.startswith("content-131073-") and a != b
    assert len(a) < 40
    assert pytest_make_parametrize_id(None, b"\0" * 100, "raw").startswith("raw-100-")
    assert pytest_make_parametrize_id(None, "\ud800" * 50, "lone").startswith("lone-50-")  # a lone surrogate


@pytest.mark.parametrize("val", ["x" * MAX_ID_CHARS, "", 7, None, 1.5])
def test_short_and_other_values_keep_pytest_ids(val):
    assert pytest_make_parametrize_id(None, val, "v") is None


@pytest.mark.parametrize("content", ["q" * 200_000])
def test_a_child_process_starts_under_a_long_parameter(content):
    assert len(os.environ["PYTEST_CURRENT_TEST"]) < 1000
    out = subprocess.run([sys.executable, "-c", "print(len('ok'))"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "2"
