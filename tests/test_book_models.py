"""The book's trained models: made once by `make models` or beside the chapters under
nbval (tests/train_book_models.py), loaded by the chapters."""

import dataclasses
import threading

import pytest

from aiayn.book import models as book_models
from aiayn.train import loop as training
from aiayn.train.config import TrainConfig, toy_model_config
from aiayn.train.presets import preset_config

SHAPE = dict(
    d_model=32, h=2, encoder_layers=1, decoder_layers=1, d_ff=64
)
TINY = dict(
    model_config=toy_model_config("copy", **SHAPE),
    task_options={"batch_size": 16},
    eval_size=20,
)


@pytest.fixture
def tiny_book_models(monkeypatch):
    """BOOK_MODELS replaced by two tiny runs, so that training them takes a second;
    no published site to download them from (test_book_model_download.py has one)."""
    monkeypatch.setenv("AIAYN_SITE", "")
    tiny = {
        "copy": TrainConfig(task="copy", steps=4, eval_every=2, **TINY),
        "reverse": TrainConfig(task="reverse", steps=4, eval_every=2, **TINY),
    }
    monkeypatch.setattr(book_models, "BOOK_MODELS", tiny)
    return tiny


def test_the_book_models_are_the_chapters_configurations():
    assert (
        book_models.BOOK_MODELS["reverse-repeats"] == TrainConfig()
    )  # the CLI's defaults
    for name in ("copy", "reverse"):
        config = book_models.BOOK_MODELS[name]
        one_layer = toy_model_config(name, encoder_layers=1, decoder_layers=1)
        easier = dict(task=name, model_config=one_layer, steps=1000)
        assert config == dataclasses.replace(TrainConfig(), **easier)


def test_a_book_configuration_is_made_when_first_read():
    configs = book_models.BookConfigs(("reverse", "en-fr"), seed=3)
    assert list(configs) == ["reverse", "en-fr"] and len(configs) == 2
    assert configs.made == {}  # no vocabulary learned before a translation run is read
    assert configs["reverse"] == preset_config("reverse", seed=3)
    assert list(configs.made) == ["reverse"]
    assert configs["reverse"] is configs["reverse"]  # made once
    assert "copy" not in configs and "en-fr" in configs
    assert list(configs.made) == ["reverse"]  # asking made nothing
    with pytest.raises(KeyError):
        configs["copy"]


def test_main_trains_every_missing_model_once(tiny_book_models, tmp_path, capsys):
    assert book_models.main(["--runs", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["copy.pt", "reverse.pt"]
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in printed] == ["copy", "reverse"]


def test_main_trains_models_side_by_side(tiny_book_models, tmp_path, capsys):
    assert book_models.main(["--runs", str(tmp_path), "--jobs", "2"]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["copy.pt", "reverse.pt"]
    printed = capsys.readouterr().out.splitlines()  # in the order they finished
    assert sorted(line.split(":")[0] for line in printed) == ["copy", "reverse"]
    alone = book_models.book_model("copy", tmp_path)  # finished: loaded, not retrained
    assert alone.finished and alone.config == tiny_book_models["copy"]


def test_main_refuses_fewer_than_one_job(capsys):
    with pytest.raises(SystemExit) as exit_:
        book_models.main(["--jobs", "0"])
    assert exit_.value.code == 2
    assert "--jobs must be at least 1" in capsys.readouterr().err


def test_a_chapter_loads_a_finished_model_without_training(
    tiny_book_models, tmp_path, monkeypatch
):
    trained = book_models.book_model("copy", tmp_path)
    assert trained.finished

    def no_training(state):
        raise AssertionError("a chapter trained although the model was finished")

    monkeypatch.setattr(training, "train_step", no_training)
    loaded = book_models.book_model("copy", tmp_path)
    assert loaded.step == trained.step and loaded.history == trained.history


def test_a_missing_model_is_trained_where_it_is_asked_for(tiny_book_models, tmp_path):
    # a reader who runs one chapter alone, without `make models`
    state = book_models.book_model("reverse", tmp_path)
    assert state.finished and (tmp_path / "reverse.pt").is_file()


def test_a_second_process_waits_for_the_model_being_trained(
    tiny_book_models, tmp_path, monkeypatch
):
    """Two processes (here two threads, each with its own lock) asking for the same
    model at once: one trains it, the other waits and loads the finished run."""
    config = tiny_book_models["copy"]
    started, release = threading.Event(), threading.Event()
    trained = []
    train = book_models.train_on_task

    def slow_train(state, **kwargs):
        trained.append(state.step)
        started.set()
        release.wait(timeout=30)  # hold the lock until the other caller waits on it
        return train(state, **kwargs)

    monkeypatch.setattr(book_models, "train_on_task", slow_train)
    path = tmp_path / "copy.pt"
    first = threading.Thread(target=book_models.load_or_train, args=(config, path))
    first.start()
    assert started.wait(timeout=30)
    results = []
    second = threading.Thread(
        target=lambda: results.append(book_models.load_or_train(config, path))
    )
    second.start()
    second.join(timeout=0.5)
    assert second.is_alive()  # waiting for the lock, not training a model of its own
    release.set()
    first.join(timeout=60)
    second.join(timeout=60)
    (state,) = results
    assert state.finished and state.config == config
    assert trained[0] == 0 and all(step == config.steps for step in trained[1:])
