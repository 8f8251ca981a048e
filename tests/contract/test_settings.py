"""The one rule every numeric setting is parsed by: a number of its kind inside its finite range, else one line naming
the setting and the range."""

from __future__ import annotations

import pytest

from contract.settings import (
    MAX_BYTES,
    MAX_MODELS,
    ORCHESTRATOR_SETTINGS,
    PARENT_PID,
    SERVICE_SETTINGS,
    UPLOAD_WAIT_SECONDS,
    SettingError,
    check_all,
)


@pytest.mark.parametrize("raw", ["abc", "-1", "1e99", "1.5", "nan", "inf", "0x10", "", " ", "9" * 5000, "1\n2"])
def test_an_integer_setting_refuses_what_is_not_an_integer_in_its_range_in_one_line(raw):
    with pytest.raises(SettingError) as err:
        MAX_MODELS.parse(raw)
    message = str(err.value)
    assert message.startswith("NODEGROUND_MAX_MODELS=") and message.endswith("must be an integer in [1, 1000000]")
    assert "\n" not in message


@pytest.mark.parametrize(("raw", "value"), [("32", 32), (" 7 ", 7), ("+5", 5), ("8e3", 8000), ("1_000", 1000)])
def test_an_integer_setting_takes_integers_and_integral_numbers(raw, value):
    assert MAX_MODELS.parse(raw) == value and isinstance(MAX_MODELS.parse(raw), int)


def test_a_float_setting_takes_numbers_in_its_range_and_names_the_flag_it_came_from():
    assert UPLOAD_WAIT_SECONDS.parse("0") == 0.0 and UPLOAD_WAIT_SECONDS.parse("2.5") == 2.5
    with pytest.raises(SettingError, match=r"^--upload-wait-seconds='-1': must be a number in \[0, 86400\]$"):
        UPLOAD_WAIT_SECONDS.parse("-1", "--upload-wait-seconds")


def test_a_setting_unset_or_empty_is_its_default_and_a_large_range_reads_as_a_power_of_two():
    assert MAX_MODELS.read({}) == 32 and MAX_MODELS.read({"NODEGROUND_MAX_MODELS": " "}) == 32
    assert PARENT_PID.read({}) is None and PARENT_PID.read({"NODEGROUND_PARENT_PID": "42"}) == 42
    assert f"2**{MAX_BYTES.bit_length() - 1}" in SERVICE_SETTINGS[0].expected()


def test_every_setting_of_each_program_is_checked_and_the_first_bad_one_named():
    for settings in (SERVICE_SETTINGS, ORCHESTRATOR_SETTINGS):
        check_all(settings, {})
        for setting in settings:
            with pytest.raises(SettingError, match=setting.env):
                check_all(settings, {setting.env: "abc"})
