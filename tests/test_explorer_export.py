"""The explorer's ONNX export (aiayn.book.explorer) agrees with PyTorch.

A small untrained model (two encoder layers, three decoder layers, two heads) is
exported once; onnxruntime runs its graphs on sources and prefixes of several lengths.
Tolerance: TOLERANCE, |ONNX - PyTorch| at most 1e-5 for attention weights and 1e-4
for memory and logits (float32's rounding). Seeded defects (two heads swapped in the
exported weights, another model's decoder) must fail the check.
"""

import copy
import hashlib
import json
import shutil

import numpy as np
import pytest
import torch

from aiayn.book import explorer
from aiayn.book.explorer import (
    GRAPHS,
    TOLERANCE,
    ExportedModel,
    check_export,
    check_sources,
    export_explorer,
    pytorch_outputs,
    write_export,
)
from aiayn.decoding import greedy_decode
from aiayn.tasks import source_ids
from aiayn.train.config import task_config, toy_model_config
from aiayn.train.state import new_run

SHAPE = dict(d_model=16, h=2, encoder_layers=2, decoder_layers=3, d_ff=32)
SOURCES = ["7", "3 1 4 1 5", "9 8 7 6 5 4 3 2 1 0"]
FIELDS = {
    "name", "tokens", "pad_id", "bos_id", "eos_id", "source_alphabet",
    "min_source_length", "max_source_length", "extra_length", "max_positions",
    "encoder_layers", "decoder_layers", "heads", "sha256",
}  # fmt: skip


def small_state(seed: int = 0):
    model_config = toy_model_config("reverse", **SHAPE)
    return new_run(
        task_config("reverse", model_config=model_config, device="cpu", seed=seed)
    )


@pytest.fixture(scope="module")
def state():
    return small_state()


@pytest.fixture(scope="module")
def folder(state, tmp_path_factory):
    folder = tmp_path_factory.mktemp("explorer") / "small"
    export_explorer(state, folder, "small")
    return folder


def swap_heads(model, first: int, second: int):
    """A copy of ``model`` whose first encoder layer has two heads swapped: the same
    memory and logits, the heads' attention maps in another order."""
    model = copy.deepcopy(model)
    attention = model.encoder.layers[0].self_attn
    width = attention.d_k
    order = torch.arange(attention.h * width).view(attention.h, width)
    order[[first, second]] = order[[second, first]]
    order = order.flatten()
    with torch.no_grad():
        for linear in (attention.w_q, attention.w_k, attention.w_v):
            linear.weight.copy_(linear.weight[order])
            linear.bias.copy_(linear.bias[order])
        attention.w_o.weight.copy_(attention.w_o.weight[:, order])
    return model


def test_model_json_describes_the_model_and_its_graphs(state, folder):
    description = json.loads((folder / "model.json").read_text())
    assert set(description) == FIELDS
    tokenizer = state.task.tgt_tokenizer
    assert description["tokens"] == list(tokenizer.tokens)
    assert (description["pad_id"], description["bos_id"], description["eos_id"]) == (
        tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id,
    )  # fmt: skip
    assert description["source_alphabet"] == list("0123456789")  # no X, no specials
    assert description["min_source_length"] == 1
    assert description["max_source_length"] == 10
    assert description["extra_length"] == state.task.decoding.extra_length
    assert description["max_positions"] == state.model.config.max_positions
    shape = [description[k] for k in ("encoder_layers", "decoder_layers", "heads")]
    assert shape == [2, 3, 2]
    for graph in GRAPHS:
        digest = hashlib.sha256((folder / graph).read_bytes()).hexdigest()
        assert description["sha256"][graph] == digest


def test_graphs_have_the_interfaces_names_and_dynamic_lengths(folder):
    exported = ExportedModel(folder)
    inputs = [
        [i.name for i in s.get_inputs()] for s in (exported.encoder, exported.decoder)
    ]
    assert inputs == [["src"], ["src", "memory", "tgt_in"]]
    outputs = exported.run(np.array([[3, 4, 5, 6, 7, 2]]), np.array([[1, 3]]))
    shapes = {name: output.shape for name, output in outputs.items()}
    assert shapes == {
        "memory": (1, 6, 16), "encoder_self": (2, 2, 6, 6), "logits": (1, 2, 14),
        "decoder_self": (3, 2, 2, 2), "cross": (3, 2, 2, 6),
    }  # fmt: skip
    assert all(output.dtype == np.float32 for output in outputs.values())


@pytest.mark.parametrize("source_length, target_length", [(1, 7), (10, 1), (5, 4)])
def test_every_output_agrees_with_pytorch(state, folder, source_length, target_length):
    generator = torch.Generator().manual_seed(source_length)
    source = state.task.sample(1, generator, length=source_length)[0]
    src = source_ids(state.task, [source])  # (1, S)
    tgt_in = torch.randint(3, 14, (1, target_length), generator=generator)
    tgt_in[0, 0] = 1  # <s>
    onnx = ExportedModel(folder).run(src.numpy(), tgt_in.numpy())
    pytorch = pytorch_outputs(state.model.eval(), src, tgt_in, pad_id=0)
    assert onnx.keys() == pytorch.keys() == TOLERANCE.keys()
    for name, output in pytorch.items():
        assert onnx[name].shape == output.shape
        assert np.abs(onnx[name] - output).max() <= TOLERANCE[name], name


def test_greedy_decoding_by_the_graphs_writes_greedy_decodes_tokens(state, folder):
    exported = ExportedModel(folder)
    for source in SOURCES:
        src = source_ids(state.task, [source])
        limit = src.size(1) - 1 + state.task.decoding.extra_length
        expected = greedy_decode(state.model.eval(), src, 0, 1, 2, limit)
        assert exported.greedy(src.numpy(), limit) == expected[0].tolist()


def test_the_check_passes_within_tolerance(state, folder):
    differences = check_export(folder, state.model, state.task, SOURCES)
    assert differences.keys() == TOLERANCE.keys()
    assert all(differences[name] <= TOLERANCE[name] for name in TOLERANCE)


def test_the_export_is_the_same_file_every_time(state, folder, tmp_path):
    export_explorer(state, tmp_path / "again", "small")
    for file in (*GRAPHS, "model.json"):
        assert (tmp_path / "again" / file).read_bytes() == (folder / file).read_bytes()


def test_swapped_heads_in_the_exported_weights_fail_the_check(state, tmp_path):
    write_export(swap_heads(state.model, 0, 1), state.task, "small", tmp_path)
    src, tgt_in = source_ids(state.task, [SOURCES[1]]), torch.tensor([[1, 5, 3]])
    onnx = ExportedModel(tmp_path).run(src.numpy(), tgt_in.numpy())
    pytorch = pytorch_outputs(state.model.eval(), src, tgt_in, pad_id=0)
    # the same logits: only the check of the maps, head by head, can catch it
    assert np.abs(onnx["logits"] - pytorch["logits"]).max() <= TOLERANCE["logits"]
    swapped_back = onnx["encoder_self"].copy()  # (layer, head, query, key)
    swapped_back[0] = swapped_back[0, [1, 0]]
    assert np.abs(swapped_back - pytorch["encoder_self"]).max() <= 1e-5
    with pytest.raises(ValueError, match="encoder_self differs from PyTorch"):
        check_export(tmp_path, state.model, state.task, SOURCES)


def test_another_models_weight_file_fails_the_check(state, folder, tmp_path):
    shutil.copytree(folder, tmp_path / "small")
    write_export(small_state(seed=1).model, state.task, "other", tmp_path / "other")
    wrong = tmp_path / "small" / "decoder.onnx"
    shutil.copy(tmp_path / "other" / "decoder.onnx", wrong)
    with pytest.raises(ValueError, match="decoder.onnx: sha256 differs"):
        check_export(tmp_path / "small", state.model, state.task, SOURCES)
    # model.json made to name the wrong file: the outputs tell
    description = json.loads((tmp_path / "small" / "model.json").read_text())
    description["sha256"]["decoder.onnx"] = hashlib.sha256(
        wrong.read_bytes()
    ).hexdigest()
    (tmp_path / "small" / "model.json").write_text(json.dumps(description))
    with pytest.raises(ValueError, match="ONNX writes|differs from PyTorch"):
        check_export(tmp_path / "small", state.model, state.task, SOURCES)


def test_an_export_that_disagrees_is_not_written(state, tmp_path, monkeypatch):
    export_graphs = explorer.export_graphs

    def swapped_export(model, pad_id, folder):
        export_graphs(swap_heads(model, 0, 1), pad_id, folder)

    monkeypatch.setattr(explorer, "export_graphs", swapped_export)
    with pytest.raises(ValueError, match="encoder_self"):
        export_explorer(state, tmp_path / "small", "small")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor a draft


def test_check_sources_span_the_tasks_lengths(state):
    lengths = [len(source.split()) for source in check_sources(state.task)]
    assert lengths == [1, 6, 10]


def test_the_command_exports_checks_and_says_sizes(
    state, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(explorer, "book_model", lambda name: state)
    assert explorer.export_cli([str(tmp_path), "reverse"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("reverse: encoder.onnx ") and "KB" in line
    assert "logits" in line and "cross" in line
    assert sorted(p.name for p in (tmp_path / "reverse").iterdir()) == sorted(
        [*GRAPHS, "model.json"]
    )


def test_the_command_refuses_an_export_that_disagrees(
    state, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(explorer, "book_model", lambda name: state)
    monkeypatch.setattr(explorer, "TOLERANCE", dict.fromkeys(TOLERANCE, -1.0))
    assert explorer.export_cli([str(tmp_path), "reverse"]) == 1
    assert "reverse: not exported: " in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_command_names_an_unknown_model(capsys):
    with pytest.raises(SystemExit):
        explorer.export_cli(["out", "nonsense"])
    assert "no book model ['nonsense']" in capsys.readouterr().err
