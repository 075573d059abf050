"""The cpu target's settings from the environment (rlx_core/targets/cpu/env.py): a numeric knob
outside 0..its bound and a path switch that is not one of its values are ArgumentErrors
(RLX-R001) naming the variable, never silently the default (an A/B run with a typo would time
the default twice); unset or blank is the default."""

from __future__ import annotations

import pytest

from rlx_core.errors import ArgumentError
from rlx_core.targets.cpu import conv, conv_blocked, conv_pair, winograd
from rlx_core.targets.cpu.env import env_choice, env_count


def test_a_count_is_a_whole_number_within_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLX_TEST_KNOB", raising=False)
    assert env_count("RLX_TEST_KNOB", "a count", 10) is None
    for ok, want in (("0", 0), (" 7 ", 7), ("10", 10)):
        monkeypatch.setenv("RLX_TEST_KNOB", ok)
        assert env_count("RLX_TEST_KNOB", "a count", 10) == want
    for bad, why in (("-1", "whole number"), ("2.5", "whole number"), ("11", "bound 10"),
                     (str(10**20), "bound 10")):
        monkeypatch.setenv("RLX_TEST_KNOB", bad)
        with pytest.raises(ArgumentError, match=f"RLX_TEST_KNOB=.*{why}") as err:
            env_count("RLX_TEST_KNOB", "a count", 10)
        assert err.value.code == "RLX-R001" and "at most 10" in str(err.value)


def test_a_switch_is_one_of_its_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_TEST_SWITCH", "  ")
    assert env_choice("RLX_TEST_SWITCH", ("0", "all")) == ""
    monkeypatch.setenv("RLX_TEST_SWITCH", "all")
    assert env_choice("RLX_TEST_SWITCH", ("0", "all")) == "all"
    monkeypatch.setenv("RLX_TEST_SWITCH", "al")
    with pytest.raises(ArgumentError, match="RLX_TEST_SWITCH='al' is not one of 0, all"):
        env_choice("RLX_TEST_SWITCH", ("0", "all"))


# the path switches as the renderer reads them: (variable, a value it takes, its reader)
_WINO_3X3 = (8, 64, 64, 1, 3, 3, 1, 1, 1, 1, 56, 56)  # n, c, o, groups, kh, kw, sh, sw, dh, dw, oh, ow
SWITCHES = [
    ("RLX_CONV_BLOCKED", "all", conv_blocked.mode),
    ("RLX_CONV_PAIR", "0", conv_pair.mode),
    ("RLX_WINOGRAD", "2", lambda: conv.winograd_tile(*_WINO_3X3)),
    ("RLX_WG_LAZY", "1", lambda: winograd.filter_on_the_fly(4, 8, 512, 512, 4, 4)),
    ("RLX_CB_FOLD", "3", lambda: conv_blocked.images_per_call(8, 4096, 1 << 30, True)),
]


@pytest.mark.parametrize(("name", "good", "read"), SWITCHES, ids=[s[0] for s in SWITCHES])
def test_a_path_switch_with_a_typo_is_a_typed_error(
        monkeypatch: pytest.MonkeyPatch, name: str, good: str, read) -> None:
    for other in ("RLX_CONV_BLOCKED", "RLX_CONV_PAIR", "RLX_WINOGRAD", "RLX_WG_LAZY",
                  "RLX_CB_FOLD"):
        monkeypatch.delenv(other, raising=False)
    default = read()
    monkeypatch.setenv(name, good)
    took = read()
    monkeypatch.setenv(name, "yes please")
    with pytest.raises(ArgumentError, match=name):
        read()
    monkeypatch.setenv(name, "")
    assert read() == default
    # what the accepted value does: the mode itself, the forced tile, lazy always, 3 images
    assert took == {"RLX_CONV_BLOCKED": "all", "RLX_CONV_PAIR": "0", "RLX_WINOGRAD": 2,
                    "RLX_WG_LAZY": True, "RLX_CB_FOLD": 3}[name]


def test_a_fold_of_zero_is_one_image_and_a_large_one_the_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLX_CB_FOLD", "0")
    assert conv_blocked.images_per_call(8, 4096, 1 << 30, True) == 1
    monkeypatch.setenv("RLX_CB_FOLD", str(conv_blocked.FOLD_MAX))
    assert conv_blocked.images_per_call(8, 4096, 1 << 30, True) == 8
    monkeypatch.setenv("RLX_CB_FOLD", str(conv_blocked.FOLD_MAX + 1))
    with pytest.raises(ArgumentError, match="RLX_CB_FOLD"):
        conv_blocked.images_per_call(8, 4096, 1 << 30, True)
