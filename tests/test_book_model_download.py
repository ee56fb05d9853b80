"""A book model missing here is downloaded from the published site, checked, before
anything is trained; where that fails, it is trained, with a line that says why.

The site is a local ``http.server`` in a thread, serving what ``--publish`` writes
(a tiny run stands in for the book's): a good download, a corrupt file, a file that
is not there (404), no server at all (no network), another run published. Each time
nothing partial is left beside the model, and a model the user has is never replaced.
"""

import dataclasses
import functools
import hashlib
import json
import socket
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

from aiayn.book import models as book_models
from aiayn.book import published
from aiayn.train import loop as training
from aiayn.train.config import TrainConfig, toy_model_config

TINY = TrainConfig(
    task="reverse",
    steps=4,
    eval_every=2,
    model_config=toy_model_config(
        "reverse", d_model=32, h=2, encoder_layers=1, decoder_layers=1, d_ff=64
    ),
    task_options={"batch_size": 16},
    eval_size=20,
)


class Site(SimpleHTTPRequestHandler):
    """Serves a folder, quietly, and notes every path asked for."""

    asked: list[str]

    def do_GET(self):
        self.asked.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """The tiny run, trained once: the model the site publishes."""
    runs = tmp_path_factory.mktemp("built")
    book_models.load_or_train(TINY, runs / "reverse.pt", progress=False)
    return runs


@pytest.fixture
def site(tmp_path, trained_run, monkeypatch):
    """(the site's folder, the requests it served) with the tiny run published, at
    ``$AIAYN_SITE``; BOOK_MODELS' "reverse" is the tiny run."""
    root = tmp_path / "site"
    published.publish_models(trained_run, ["reverse"], root / "models")
    asked = []
    handler = functools.partial(
        type("Handler", (Site,), {"asked": asked}), directory=str(root)
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("AIAYN_SITE", f"http://127.0.0.1:{server.server_port}")
    monkeypatch.setattr(book_models, "BOOK_MODELS", {"reverse": TINY})
    yield root, asked
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def runs(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    return folder


def left_in(runs) -> list[str]:
    return sorted(path.name for path in runs.iterdir())


def no_training(monkeypatch):
    def train_step(state, batch):
        raise AssertionError("trained although the published model was there")

    monkeypatch.setattr(training, "train_step", train_step)


def test_the_manifest_holds_each_file_size_and_sha256(site):
    root, _ = site
    manifest = json.loads((root / "models" / "manifest.json").read_text())
    data = (root / "models" / "reverse.pt").read_bytes()
    assert manifest == {
        "reverse.pt": {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    }


def test_a_published_model_is_downloaded_checked_and_loaded(
    site, runs, monkeypatch, capsys
):
    root, asked = site
    no_training(monkeypatch)
    state = book_models.book_model("reverse", runs, progress=False)
    assert state.finished and state.config == TINY
    assert asked == ["/models/manifest.json", "/models/reverse.pt"]
    downloaded = (runs / "reverse.pt").read_bytes()
    assert downloaded == (root / "models" / "reverse.pt").read_bytes()
    assert left_in(runs) == ["reverse.pt", "reverse.pt.lock"]
    assert "downloaded, size and SHA-256 checked" in capsys.readouterr().err


def corrupt(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte changed, the size the manifest says
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage, why",
    [
        (corrupt, "checksum mismatch (SHA-256"),
        (lambda path: path.write_bytes(path.read_bytes()[:-100]), "checksum mismatch"),
        (lambda path: path.unlink(), "not published (HTTP 404"),
    ],
    ids=["corrupt", "truncated", "missing"],
)
def test_a_bad_download_falls_back_to_training(site, runs, damage, why, capsys):
    root, asked = site
    damage(root / "models" / "reverse.pt")
    state = book_models.book_model("reverse", runs, progress=False)
    message = capsys.readouterr().err
    assert f"reverse: not downloaded: {why}" in message, message
    assert "training it here instead" in message
    assert state.finished and state.config == TINY  # trained here
    assert asked[-1] == "/models/reverse.pt"  # the download was tried
    assert left_in(runs) == ["reverse.pt", "reverse.pt.lock"]  # nothing partial


def test_no_network_falls_back_to_training(runs, monkeypatch, capsys):
    with socket.socket() as probe:  # a port that nothing listens on, once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AIAYN_SITE", f"http://127.0.0.1:{port}/")
    monkeypatch.setattr(book_models, "BOOK_MODELS", {"reverse": TINY})
    state = book_models.book_model("reverse", runs, progress=False)
    message = capsys.readouterr().err
    assert "reverse: not downloaded: no network (" in message, message
    assert state.finished and left_in(runs) == ["reverse.pt", "reverse.pt.lock"]


def test_another_published_run_is_not_used(site, runs, monkeypatch, capsys):
    other = dataclasses.replace(TINY, seed=TINY.seed + 1)
    monkeypatch.setattr(book_models, "BOOK_MODELS", {"reverse": other})
    state = book_models.book_model("reverse", runs, progress=False)
    message = capsys.readouterr().err
    assert "not downloaded: the published run is another configuration" in message
    assert state.config == other and left_in(runs) == ["reverse.pt", "reverse.pt.lock"]


def test_without_a_site_a_missing_model_is_trained(runs, monkeypatch, capsys):
    monkeypatch.setenv("AIAYN_SITE", "")  # as `make` runs the chapters
    monkeypatch.setattr(book_models, "BOOK_MODELS", {"reverse": TINY})
    assert book_models.book_model("reverse", runs, progress=False).finished
    assert "not downloaded: no published book known" in capsys.readouterr().err


def test_a_model_the_user_has_is_never_replaced(site, runs, monkeypatch):
    _, asked = site
    mine = runs / "reverse.pt"
    book_models.load_or_train(TINY, mine, progress=False)  # the user's own run
    before = mine.read_bytes()
    no_training(monkeypatch)
    assert book_models.book_model("reverse", runs, progress=False).finished
    assert asked == [] and mine.read_bytes() == before


def test_a_second_caller_waits_for_the_download(site, runs, monkeypatch):
    """The download happens under the model's lock: a caller that asks meanwhile waits,
    then loads the downloaded run (no training, no second download)."""
    _, asked = site
    started, release = threading.Event(), threading.Event()
    fetch = published.fetch_model

    def slow_fetch(*args, **kwargs):
        started.set()
        release.wait(timeout=30)
        return fetch(*args, **kwargs)

    monkeypatch.setattr(book_models, "fetch_model", slow_fetch)
    no_training(monkeypatch)
    results = []

    def ask():
        results.append(book_models.book_model("reverse", runs, progress=False))

    first, second = threading.Thread(target=ask), threading.Thread(target=ask)
    first.start()
    assert started.wait(timeout=30)
    second.start()
    second.join(timeout=0.5)
    assert second.is_alive()  # waiting for the lock
    release.set()
    first.join(timeout=60)
    second.join(timeout=60)
    assert [state.finished for state in results] == [True, True]
    assert asked == ["/models/manifest.json", "/models/reverse.pt"]


def test_publish_copies_every_book_model_with_its_manifest(
    trained_run, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(book_models, "BOOK_MODELS", {"reverse": TINY})
    folder = tmp_path / "html" / "models"
    assert book_models.main(["--runs", str(trained_run), "--publish", str(folder)]) == 0
    published_files = sorted(path.name for path in folder.iterdir())
    assert published_files == ["manifest.json", "reverse.pt"]
    assert "1 book models" in capsys.readouterr().out
    monkeypatch.setattr(book_models, "BOOK_MODELS", {"reverse": TINY, "copy": TINY})
    with pytest.raises(SystemExit) as exit_:  # one not trained: nothing half published
        book_models.main(["--runs", str(trained_run), "--publish", str(tmp_path / "x")])
    assert exit_.value.code == 2 and "no copy in" in capsys.readouterr().err
