"""The book's named training runs, in one table.

A named run is a task and changes to its own defaults (``task_config``): fields of
TrainConfig or of its model's TransformerConfig (``changed_config``). The book's models
(``aiayn.book.models``), the base row of Table 3 in miniature
(``aiayn.tools.variations``) and the runs without short sources that the appendix on
time to accuracy compares (``aiayn.tools.time_to_accuracy``) all read it.

    preset_config("en-de", seed=1)       # a TrainConfig
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from aiayn.train.config import TrainConfig, changed_config, task_config


@dataclass(frozen=True)
class Preset:
    """A named run: a task and changes to its own defaults."""

    task: str
    changes: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))


# reverse-repeats trained on long sources alone (no uniform_length_share), for up to
# 8000 steps or until 99.5% exact match
NO_SHORT_SOURCES = MappingProxyType(
    dict(uniform_length_share=0.0, steps=8000, target_exact_match=0.995)
)

PRESETS = {
    # the book's models, the longest first: each task with its own defaults, as
    # `python -m aiayn train --task NAME` trains it ("Training the toy tasks",
    # "Translation in miniature", "English constituency parsing")
    "reverse-repeats": Preset("reverse-repeats"),
    "en-fr": Preset("en-fr"),
    "en-de": Preset("en-de"),
    "parse": Preset("parse"),
    "copy": Preset("copy"),
    "reverse": Preset("reverse"),
    # Table 3's base row ("Model variations"): the toy model with the paper's P_drop
    # and eps_ls (both 0.1), batches of 128 sources, a warm-up of 100 steps at half
    # Eq. (3)'s rate: a short run that is still learning
    "table3-base": Preset(
        "reverse-repeats",
        MappingProxyType(
            dict(
                dropout=0.1,
                label_smoothing=0.1,
                batch_size=128,
                warmup_steps=100,
                lr_factor=0.5,
                uniform_length_share=0.0,  # the sweep ran before short sources
            )
        ),
    ),
    # the runs of the appendix "What made the last percent faster" (its stored runs:
    # the measurement folders of the same names): no short sources; and no short
    # sources with batches of 256, a warm-up of 300 steps at half Eq. (3)'s rate, and
    # the mean of 5 snapshots 20 steps apart
    "no-short-sources": Preset("reverse-repeats", NO_SHORT_SOURCES),
    "no-short-sources-batch-256": Preset(
        "reverse-repeats",
        MappingProxyType(
            NO_SHORT_SOURCES
            | dict(
                batch_size=256,
                warmup_steps=300,
                lr_factor=0.5,
                snapshot_every=20,
                average_last=5,
            )
        ),
    ),
}


def preset_config(
    name: str, changes: Mapping[str, object] = MappingProxyType({}), **fields
) -> TrainConfig:
    """The named run ``name``, with ``fields`` (seed=, steps=, device=: TrainConfig
    fields) and then ``changes`` (of TrainConfig or of its model) on top."""
    if name not in PRESETS:
        raise ValueError(f"unknown run {name!r}: choose one of {', '.join(PRESETS)}")
    preset = PRESETS[name]
    config = task_config(preset.task, **fields)
    return changed_config(config, dict(preset.changes) | dict(changes))
