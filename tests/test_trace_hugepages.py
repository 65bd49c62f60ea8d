"""The replay passes run with numpy's huge-page advice off and restore the caller's setting."""
import numpy as np
import pytest

from scalgraph.trace import hugepages


def test_advice_off_inside_and_restored_after():
    setter = hugepages._setter()
    assert setter is not None                  # the project's numpy has the switch
    seen = []
    wrapped = hugepages.without_hugepage_advice(lambda: seen.append(np._core.multiarray._get_madvise_hugepage()))
    for before in (True, False):
        setter(before)
        wrapped()
        assert seen[-1] is False
        assert np._core.multiarray._get_madvise_hugepage() is before
    setter(True)


def test_advice_restored_when_the_pass_raises():
    setter = hugepages._setter()
    assert setter is not None

    @hugepages.without_hugepage_advice
    def boom():
        raise ValueError("x")

    setter(True)
    with pytest.raises(ValueError):
        boom()
    assert np._core.multiarray._get_madvise_hugepage() is True


def test_replay_entry_points_are_wrapped():
    from scalgraph.trace import critical_path, delay, forward
    for f in (forward.build_context, forward.forward_replay, delay.delay_analysis, critical_path.critical_path):
        assert getattr(f, "__wrapped__", None) is not None
