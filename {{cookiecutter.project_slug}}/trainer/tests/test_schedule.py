"""The learning-rate schedule: warm-up, then constant, cosine or step, as a function of progress."""

import math

import pytest

from horovod_trainer.schedule import Schedule, parse_epochs


def schedule(kind, **extra):
    return Schedule(base_lr=0.1, peak_lr=0.8, warmup_epochs=2, total_epochs=10, kind=kind, **extra)


@pytest.mark.parametrize("kind", ["constant", "cosine", "step"])
def test_warm_up_ramps_linearly_from_base_to_peak(kind):
    plan = schedule(kind, decay_epochs=(5.0,))
    assert plan.rate(0.0) == pytest.approx(0.1)
    assert plan.rate(1.0) == pytest.approx(0.45)
    assert plan.rate(2.0) == pytest.approx(0.8)


def test_cosine_falls_from_peak_to_zero_at_the_last_epoch():
    plan = schedule("cosine")
    assert plan.rate(2.0) == pytest.approx(0.8)
    assert plan.rate(6.0) == pytest.approx(0.4)  # half-way through the decay
    assert plan.rate(10.0) == pytest.approx(0.0, abs=1e-12)
    assert plan.rate(12.0) == pytest.approx(0.0, abs=1e-12)  # past the end: stays at the bottom
    rates = [plan.rate(2 + k / 10) for k in range(81)]
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))


def test_step_multiplies_at_each_decay_epoch():
    plan = schedule("step", decay_epochs=(4.0, 7.5), decay_factor=0.5)
    assert plan.rate(3.99) == pytest.approx(0.8)
    assert plan.rate(4.0) == pytest.approx(0.4)
    assert plan.rate(7.49) == pytest.approx(0.4)
    assert plan.rate(7.5) == pytest.approx(0.2)


def test_mid_epoch_progress_lands_on_the_same_curve():
    plan = schedule("cosine")
    # Step 30 of 100 in epoch 5 is progress 5.3, whatever the run that got there.
    assert plan.rate(5 + 30 / 100) == pytest.approx(0.4 * (1 + math.cos(math.pi * 3.3 / 8)))


def test_no_warm_up_starts_at_the_peak():
    assert Schedule(0.1, 0.8, 0, 10).rate(0.0) == pytest.approx(0.8)


@pytest.mark.parametrize("text", ["30,20", "-1", "5,5", "a"])
def test_decay_epochs_must_increase(text):
    with pytest.raises(ValueError):
        parse_epochs(text)


def test_decay_epochs_parse():
    assert parse_epochs("30,60,80") == (30.0, 60.0, 80.0)
    assert parse_epochs("") == ()
