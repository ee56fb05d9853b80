import argparse
import importlib.util
import json
import math
from pathlib import Path

import pytest

from aiayn.book.models import MEASUREMENTS
from aiayn.tools.time_to_accuracy import (
    NOT_REACHED,
    Reached,
    configured,
    first_reached,
    learning_curve,
    median_reached,
    parse_change,
    report,
)
from aiayn.train.config import TrainConfig, toy_model_config

SHAPE = dict(d_model=16, h=2, encoder_layers=1, decoder_layers=1,
             d_ff=32)  # fmt: skip
TINY = TrainConfig(task="copy", model_config=toy_model_config("copy", **SHAPE),
                   task_options={"batch_size": 16}, steps=20, snapshot_every=5,
                   device="cpu")  # fmt: skip


def test_learning_curve_evaluates_every_few_steps_and_times_training():
    curve = learning_curve(TINY, every=10, n=20)
    assert [point.step for point in curve] == [10, 20]
    assert 0 < curve[0].seconds < curve[1].seconds
    assert all(0 <= point.exact_match <= 1 for point in curve)


def test_first_reached_and_the_median_over_seeds():
    curve = [
        Reached(250, 10.0, 0.95),
        Reached(500, 20.0, 0.992),
        Reached(750, 30.0, 0.9995),
    ]
    assert first_reached(curve, 0.99) == curve[1]
    assert first_reached(curve, 0.999) == curve[2]
    assert first_reached(curve[:2], 0.999) == NOT_REACHED
    median = median_reached([curve[1], curve[2], NOT_REACHED])
    assert (median.step, median.seconds) == (750, 30.0)  # one seed never got there
    assert math.isinf(median_reached([curve[1], NOT_REACHED, NOT_REACHED]).step)


def test_report_gives_each_seed_the_median_and_the_ratio_to_the_tutorial():
    curves = {0: [Reached(500, 20.0, 0.992)], 1: [Reached(500, 22.0, 0.9991)]}
    text = report(curves, batch_size=64)
    assert "seed 0: step 500, 20.0 s" in text
    assert "seed 0: not reached" in text  # 99.9%
    assert "median: step 500, 21.0 s" in text
    assert f"sequences seen: 32,000, {3_200_000 / 32_000:.1f}x fewer" in text


def test_changes_reach_the_run_and_its_model():
    config = configured("copy", 1, 50, "cpu", {"length_power": 2.0, "d_model": 32})
    assert (config.task, config.seed, config.steps) == ("copy", 1, 50)
    assert config.task_options == {"length_power": 2.0}
    assert config.model_config.d_model == 32
    with pytest.raises(ValueError, match="no such field .*'bogus'"):
        configured("copy", 0, 50, "cpu", {"bogus": 1})


def test_a_change_is_a_field_and_a_python_literal():
    assert parse_change("lr_factor=0.25") == ("lr_factor", 0.25)
    assert parse_change("positional='learned'") == ("positional", "learned")
    with pytest.raises(argparse.ArgumentTypeError, match="not FIELD=VALUE"):
        parse_change("lr_factor")


def test_the_stored_sweep_plans_are_what_the_harnesses_ran():
    """The appendix reads a sweep's variants and settings from the plan stored with its
    results (the library's package data); the harness, a script beside the book, is
    where they were written."""
    harnesses = Path(__file__).resolve().parents[1] / "book" / "measurements"
    for name in ("tta_sweep", "tta_cpu_sweep"):
        spec = importlib.util.spec_from_file_location(name, harnesses / f"{name}.py")
        harness = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(harness)
        plan = json.loads((MEASUREMENTS / f"{name}_plan.json").read_text())
        assert list(plan["VARIANTS"]) == list(harness.VARIANTS)  # in the same order
        for setting, value in plan.items():
            stored = getattr(harness, setting)
            assert json.loads(json.dumps(stored)) == value, (name, setting)
