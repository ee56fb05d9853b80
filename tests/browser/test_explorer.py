"""The explorer (book/_static/explorer.js) in Chromium, checked against PyTorch.

No book build is needed: the tests serve temporary sites of one page holding an
explorer, with explorer.js and explorer.css from book/_static, the three files of ONNX
Runtime Web that book/_ext/explorer_assets.py copies from node_modules, and an
untrained small Transformer of the reverse task exported by aiayn.book.explorer (a
second of tracing). The test types sources, presses Enter, and compares what the page
shows with PyTorch: the tokens written (greedy_decode's), and every weight of the maps
it draws, for every kind, layer and head and the mean over the heads, at the last
decoding step and the first (their data-weight, ``WEIGHT_TOLERANCE``), and the weight
and tokens that hovering a cell and the arrow keys show. No request may leave
127.0.0.1, and the console may show no error.

Seeded defects make the comparison fail: a wrong weight file (a decoder.onnx of
another model, its checksum in model.json made to match) and a swapped head order in
what the page shows (explorer.js's choice of a head reversed). A graph that is not the
one model.json names is refused by the page, which keeps its note. Bad input gets a
one-line message and leaves the picture as it was; opened as a file or without
JavaScript, the page keeps its static figure and the note that says how to get the
live explorer (which, where it runs, takes the figure's place on screen).
"""

import importlib
import json
import shutil
import sys

import pytest
import torch
from conftest import ROOT, SCREENSHOTS, serve
from test_book_html import ALLOWED_CONSOLE_ERRORS

from aiayn.book.explorer import write_export
from aiayn.book.published import file_digest
from aiayn.decoding import greedy_decode
from aiayn.model.maps import attention_maps
from aiayn.model.masks import padding_mask
from aiayn.model.transformer import Transformer
from aiayn.tasks import get_task, source_ids
from aiayn.train.config import toy_model_config

STATIC = ROOT / "book" / "_static"
sys.path.insert(0, str(ROOT / "book" / "_ext"))
RUNTIME = ROOT / "node_modules" / "onnxruntime-web" / "dist"
# the files of the runtime that the book's build serves (book/_ext/explorer_assets.py)
RUNTIME_FILES = importlib.import_module("explorer_assets").RUNTIME_FILES
NAME = "tiny"
# float32 in ONNX Runtime Web's WebAssembly against float32 in PyTorch, a few dozen
# operations in another order: rounding, far below any weight a defect changes
WEIGHT_TOLERANCE = 1e-5
# the shortest and the longest sources, digits repeated
SOURCES = ["6", "3 1 4 1 5", "2 7 1 8 2 8 1 8 2 8"]
# PyTorch's likeliest token beats the next by more than this at every step: far more
# than float32's rounding, so that the page must write the same tokens
MARGIN = 1e-3
# where explorer.js picks one head's weights: the swapped-head defect reverses it
HEAD_PICK = "(layer * heads + h) * size, (layer * heads + h + 1) * size"
SWAPPED_HEADS = (
    "(layer * heads + heads - 1 - h) * size, (layer * heads + heads - h) * size"
)
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<link rel="stylesheet" href="_static/explorer.css">
<script src="_static/explorer.js"></script></head>
<body style="max-width: 760px; margin: auto; font-family: sans-serif">
<figure id="static-figure">The book's static figure</figure>
<div class="aiayn-explorer" data-model="{name}" data-source="{source}"
     data-figure="static-figure">
<p class="aiayn-explorer-note">Served over HTTP, this figure becomes a live
explorer.</p>
</div></body></html>
"""


def untrained_model(seed: int) -> Transformer:
    """The book's toy shape for the reverse task, smaller, as initialised by ``seed``:
    2 layers on each side and 4 heads, so that layers and heads can be mixed up. Its
    output layer is its own (tied to the embedding, an untrained model writes the
    token it reads): with seed 11 it writes several digits, and stops at </s> for
    SOURCES[1] before its length limit."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        config = toy_model_config("reverse", d_model=32, d_ff=64, tie_weights=False)
        model = Transformer(config)
    return model.eval()


@pytest.fixture(scope="module")
def task():
    return get_task("reverse")


@pytest.fixture(scope="module")
def model():
    return untrained_model(seed=11)


@pytest.fixture(scope="module")
def export(tmp_path_factory, model, task):
    """The model's graphs and model.json, as the book exports its models."""
    folder = tmp_path_factory.mktemp("export") / NAME
    write_export(model, task, NAME, folder)
    return folder


def make_site(folder, export, explorer_js=None):
    """A site of one page with an explorer of ``export``: (its folder, its URL)."""
    if not RUNTIME.is_dir():
        pytest.fail(f"no {RUNTIME}: run `npm ci` (make setup does)")
    static = folder / "_static"
    (static / "explorer" / "ort").mkdir(parents=True)
    for file in RUNTIME_FILES:
        shutil.copy(RUNTIME / file, static / "explorer" / "ort" / file)
    shutil.copytree(export, static / "explorer" / NAME)
    (static / "explorer.js").write_text(
        explorer_js or (STATIC / "explorer.js").read_text()
    )
    shutil.copy(STATIC / "explorer.css", static / "explorer.css")
    (folder / "index.html").write_text(PAGE.format(name=NAME, source=SOURCES[1]))
    server, url = serve(folder)
    return server, f"{url}/index.html"


@pytest.fixture(scope="module")
def explorer(browser, tmp_path_factory, export):
    """The explorer of ``export`` in one page, which the tests share (each its own
    sources)."""
    server, url = make_site(tmp_path_factory.mktemp("site"), export)
    explorer = Explorer(browser, url)
    yield explorer
    explorer.page.close()
    server.shutdown()


class Explorer:
    """The page in Chromium, everything it requested, and its console's errors."""

    def __init__(self, browser, url, width=1280, live=True):
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.requests, self.errors = [], []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda message: self.errors.append(message.text)
                     if message.type == "error" else None)  # fmt: skip
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.origin = url.rsplit("/", 1)[0]
        self.page.goto(url)
        self.root = self.page.locator(".aiayn-explorer")
        if live:
            self.wait_for_answer(1)  # the page's own source, on load

    def wait_for_answer(self, answers: int) -> None:
        self.page.wait_for_function(
            "n => document.querySelector('.aiayn-explorer').dataset.answers == n",
            arg=str(answers), timeout=30_000,
        )  # fmt: skip

    def run(self, source: str) -> list[str]:
        """Type ``source``, press Enter: the tokens written."""
        answers = int(self.root.get_attribute("data-answers") or 0)
        self.page.fill(".aiayn-explorer input[type=text]", source)
        self.page.press(".aiayn-explorer input[type=text]", "Enter")
        self.wait_for_answer(answers + 1)
        return self.page.locator(".aiayn-explorer-output span").all_inner_texts()

    def shown_map(self) -> torch.Tensor:
        """The weights of the map drawn, (rows, cols), as the cells hold them."""
        cells = self.page.eval_on_selector_all(
            ".aiayn-explorer-map rect[data-row]",
            "cells => cells.map(c => [+c.dataset.row, +c.dataset.col, "
            "+c.dataset.weight])",
        )
        rows, cols = (1 + max(cell[axis] for cell in cells) for axis in (0, 1))
        weights = torch.full((rows, cols), float("nan"))
        for row, col, weight in cells:
            weights[row, col] = weight
        return weights

    def choose(self, kind: str, layer: int, head: int | str) -> None:
        """Show a map: layer and head counted from 0, as in PyTorch."""
        selects = self.page.locator(".aiayn-explorer-choice select")
        chosen = selects.evaluate_all("selects => selects.map(s => s.value)")
        wanted = [kind, str(layer + 1), "mean" if head == "mean" else str(head + 1)]
        for i, (now, value) in enumerate(zip(chosen, wanted, strict=True)):
            if now != value:
                selects.nth(i).select_option(value=value)

    def check_network_and_console(self) -> None:
        outside = [url for url in self.requests if not url.startswith(self.origin)]
        assert not outside, f"requests that leave the local server: {outside}"
        assert not self.errors, f"console errors: {self.errors}"


def reference(model, task, source: str) -> dict:
    """PyTorch's answer for ``source``: the tokens greedy_decode writes, and the maps
    of the decoder's run over all of them (causal: step t's maps are their first t
    rows), each (layers, heads, queries, keys)."""
    tokenizer = task.tgt_tokenizer
    src = source_ids(task, [source])  # (1, S)
    length = src.size(1) - 1
    limit = min(length + task.decoding.extra_length, model.config.max_positions)
    ids = greedy_decode(model, src, tokenizer.pad_id, tokenizer.bos_id,
                        tokenizer.eos_id, limit)[0].tolist()  # fmt: skip
    if tokenizer.eos_id in ids:
        ids = ids[: ids.index(tokenizer.eos_id) + 1]
    tgt_in = torch.tensor([[tokenizer.bos_id, *ids[:-1]]])  # (1, T)
    with torch.no_grad():
        top_two = model(src, tgt_in).topk(2, dim=-1).values  # (1, T, 2)
    assert (top_two[..., 0] - top_two[..., 1]).min() > MARGIN, source
    maps = attention_maps(model, src, tgt_in, padding_mask(src, tokenizer.pad_id))
    return {
        "tokens": [tokenizer.tokens[i] for i in ids],
        "maps": {kind: torch.cat(weights) for kind, weights in maps.items()},
    }


def disagreements(explorer: Explorer, expected: dict, every_step=True) -> list[str]:
    """Where the maps the page draws differ from PyTorch's (``reference``), for every
    kind, layer and head and the mean: at the last step, and the first too."""
    found, steps = [], len(expected["tokens"])
    shown = [("End", steps), ("Home", 1)][: 2 if every_step else 1]
    for key, step in shown:  # the slider, moved by the keyboard
        explorer.page.press(".aiayn-explorer input[type=range]", key)
        for kind, maps in expected["maps"].items():
            if kind != "encoder_self":  # the decoder's maps as they were at the step
                maps = maps[..., :step, : step if kind == "decoder_self" else None]
            layers, heads = maps.shape[:2]
            for layer in range(layers):
                for head in [*range(heads), "mean"]:
                    explorer.choose(kind, layer, head)
                    want = maps[layer].mean(0) if head == "mean" else maps[layer, head]
                    shown = explorer.shown_map()
                    if shown.shape != want.shape or not torch.allclose(
                        shown, want, rtol=0, atol=WEIGHT_TOLERANCE
                    ):
                        found.append(f"{kind} layer {layer} head {head} step {step}")
    return found


def test_the_explorer_shows_what_pytorch_computes(explorer, model, task):
    first_answer_ms = int(explorer.root.get_attribute("data-first-answer-ms"))
    # every source at its last step, one at its first too; one typed without spaces
    for source in [*SOURCES, SOURCES[1].replace(" ", "")]:
        expected = reference(model, task, " ".join(source.replace(" ", "")))
        assert explorer.run(source) == expected["tokens"], source
        every_step = source == SOURCES[1]
        assert disagreements(explorer, expected, every_step) == [], source
    assert not explorer.page.is_visible("#static-figure")  # the explorer stands for it
    explorer.check_network_and_console()
    print(f"page load to first answer: {first_answer_ms} ms")
    assert first_answer_ms < 20_000


def test_hover_and_arrow_keys_show_a_weight_and_its_tokens(explorer, model, task):
    source = SOURCES[1]
    expected = reference(model, task, source)
    explorer.run(source)
    explorer.choose("cross", 1, 2)
    weights = expected["maps"]["cross"][1, 2]  # (T, S)
    readout = explorer.page.locator(".aiayn-explorer-readout")
    explorer.page.hover(".aiayn-explorer-map rect[data-row='2'][data-col='3']")
    written, sources = expected["tokens"], [*source.split(), "</s>"]
    assert readout.inner_text() == (
        f"token written “{written[2]}” → source token “{sources[3]}”: "
        f"weight {weights[2, 3]:.3f}"
    )
    explorer.page.focus(".aiayn-explorer-map")
    explorer.page.keyboard.press("ArrowDown")
    explorer.page.keyboard.press("ArrowLeft")
    assert readout.inner_text().startswith(
        f"token written “{written[3]}” → source token “{sources[2]}”: "
        f"weight {weights[3, 2]:.3f}"
    )
    explorer.check_network_and_console()


def test_bad_input_gets_a_message_and_keeps_the_picture(explorer):
    answers = explorer.root.get_attribute("data-answers")
    picture = explorer.page.inner_html(".aiayn-explorer-map")
    message = explorer.page.locator(".aiayn-explorer-message")
    for source, says in [
        ("1 2 a", "“a” is not in this model's alphabet"),
        ("1 2 3 4 5 6 7 8 9 0 1", "A source has 1 to 10 digits; this one has 11."),
        ("", "A source has 1 to 10 digits; this one has 0."),
        ("-1", "“-” is not in this model's alphabet"),
    ]:
        explorer.page.fill(".aiayn-explorer input[type=text]", source)
        explorer.page.press(".aiayn-explorer input[type=text]", "Enter")
        assert message.inner_text().startswith(says), source
        assert explorer.page.inner_html(".aiayn-explorer-map") == picture
    assert explorer.root.get_attribute("data-answers") == answers
    explorer.run("1 2")
    assert message.inner_text() == ""
    explorer.check_network_and_console()


@pytest.mark.parametrize("width", [375, 1280])
def test_the_explorer_fits_the_page(explorer, width):
    explorer.page.set_viewport_size({"width": width, "height": 900})
    explorer.run(SOURCES[-1])
    overflow = explorer.page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"{overflow} px wider than a {width}-px window"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    explorer.page.screenshot(path=SCREENSHOTS / f"explorer-{width}.png", full_page=True)
    explorer.check_network_and_console()


def test_a_wrong_weight_file_is_caught(browser, tmp_path, export, model, task):
    # a decoder of another model, its checksum in model.json made to match
    other = tmp_path / "other"
    write_export(untrained_model(seed=12), task, NAME, other)
    seeded = tmp_path / "seeded"
    shutil.copytree(export, seeded)
    shutil.copy(other / "decoder.onnx", seeded / "decoder.onnx")
    description = json.loads((seeded / "model.json").read_text())
    description["sha256"]["decoder.onnx"] = file_digest(seeded / "decoder.onnx")
    (seeded / "model.json").write_text(json.dumps(description))
    server, url = make_site(tmp_path / "site", seeded)
    try:
        explorer = Explorer(browser, url)
        source = SOURCES[-1]
        expected = reference(model, task, source)
        tokens = explorer.run(source)
        assert tokens != expected["tokens"] or disagreements(explorer, expected, False)
    finally:
        server.shutdown()


def test_a_swapped_head_order_is_caught(browser, tmp_path, export, model, task):
    script = (STATIC / "explorer.js").read_text()
    assert script.count(HEAD_PICK) == 1, "explorer.js picks a head elsewhere now"
    server, url = make_site(
        tmp_path, export, explorer_js=script.replace(HEAD_PICK, SWAPPED_HEADS)
    )
    try:
        explorer = Explorer(browser, url)
        source = SOURCES[1]
        expected = reference(model, task, source)
        assert explorer.run(source) == expected["tokens"]  # the arithmetic is right
        found = disagreements(explorer, expected, every_step=False)
        # every single head is shown wrong, the mean over them is not
        assert found and not any("mean" in entry for entry in found)
    finally:
        server.shutdown()


def test_a_graph_that_is_not_the_exported_one_is_refused(browser, tmp_path, export):
    seeded = tmp_path / "seeded"
    shutil.copytree(export, seeded)
    with open(seeded / "encoder.onnx", "ab") as graph:
        graph.write(b"\0")  # its checksum no longer matches model.json's
    server, url = make_site(tmp_path / "site", seeded)
    try:
        explorer = Explorer(browser, url, live=False)
        explorer.page.wait_for_selector(".aiayn-explorer[data-state=unavailable]")
        assert explorer.page.is_visible(".aiayn-explorer-note")
        assert explorer.page.is_visible("#static-figure")
        assert explorer.page.locator(".aiayn-explorer-map").count() == 0
    finally:
        server.shutdown()


def test_without_a_server_or_javascript_the_note_stays(browser, tmp_path, export):
    server, url = make_site(tmp_path, export)
    server.shutdown()
    page = browser.new_page()
    page.goto((tmp_path / "index.html").as_uri())
    page.wait_for_selector(".aiayn-explorer[data-state=unavailable]")
    assert page.is_visible(".aiayn-explorer-note") and page.is_visible("#static-figure")
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto((tmp_path / "index.html").as_uri())
    assert page.is_visible(".aiayn-explorer-note") and page.is_visible("#static-figure")
    context.close()


# --- the book's own explorers, with the trained book models ---------------------------
BOOK_EXPLORERS = {  # page: (model, how the page shows it)
    "book/cover.html": ("reverse", None),
    "book/looking-inside.html": ("reverse-repeats", "Try it"),
}


@pytest.mark.parametrize("path", BOOK_EXPLORERS)
def test_the_book_s_explorers_show_the_trained_models(browser, book_url, path):
    """On the built pages, each explorer's tokens and maps are PyTorch's for the book
    model it exports (trained by `make`), on sources where that model's choices are not
    near ties (so that float rounding cannot flip them on any machine)."""
    from aiayn.book.models import book_model

    name, dropdown = BOOK_EXPLORERS[path]
    state = book_model(name)
    model, task = state.averaged_model().eval(), state.task
    page = Explorer(browser, f"{book_url}/{path}", live=False)
    page.origin = book_url  # the whole site, not the page's folder
    try:
        if dropdown:
            page.page.locator(".admonition-title", has_text=dropdown).click()
        page.wait_for_answer(1)
        checked = 0
        sources = ["7 2 9 4 0 6 1 8 3 5", "3 1 4 1 5 9 2 6 5 3", "5 0 5", "8 1", "6"]
        for source in sources:
            try:
                expected = reference(model, task, source)
            except AssertionError:  # a near tie: not a fair comparison
                continue
            assert page.run(source) == expected["tokens"], source
            assert disagreements(page, expected, every_step=False) == [], source
            checked += 1
        assert checked >= 3, f"{name}: only {checked} sources without near ties"
        page.errors = [e for e in page.errors if e not in ALLOWED_CONSOLE_ERRORS]
        page.check_network_and_console()
    finally:
        page.page.close()
