"""The explorer's models: book models exported to ONNX, for the reader's browser.

    python -m aiayn.book.explorer OUTDIR            # reverse and reverse-repeats
    python -m aiayn.book.explorer OUTDIR reverse    # the models named

For each model, a folder OUTDIR/NAME holds what the page runs (ONNX Runtime Web):

- ``encoder.onnx``: src int64 (1, S) -> memory float32 (1, S, d_model) and
  encoder_self (L_enc, h, S, S);
- ``decoder.onnx``: src (1, S), memory (1, S, d_model), tgt_in int64 (1, T) -> logits
  (1, T, V), decoder_self (L_dec, h, T, T) and cross (L_dec, h, T, S), the causal
  mask inside the graph;
- ``model.json``: the vocabulary, the special ids, which sources the task takes, its
  decoding bound, the model's shape and the sha256 of each graph.

S and T are dynamic; one source, so no padding. Attention maps are (layer, head,
query, key). The weights are outputs of the graphs: ``EncoderGraph`` and
``DecoderGraph`` run the reference stacks, as ``aiayn.model.maps.attention_maps``
does, and return what its hooks read. The page's JavaScript only loops, as
``greedy_decode`` does.

An export is checked before it is written (``check_export``): onnxruntime runs the
graphs on a few sources of the task, greedy decoding driven by them must write
``greedy_decode``'s tokens, and every output must agree with PyTorch within
``TOLERANCE``. Otherwise nothing is written and the command says what disagreed.
"""

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from aiayn.book.models import BOOK_MODELS, book_model
from aiayn.book.published import file_digest
from aiayn.decoding import greedy_decode
from aiayn.evaluation import evaluation_mode
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.maps import attention_maps, weights_recorded
from aiayn.model.masks import padding_mask, subsequent_mask
from aiayn.model.transformer import Transformer
from aiayn.tasks import Task, source_ids
from aiayn.train.state import TrainState

# the book models the page explores: the cover's, and Looking inside's
EXPLORER_MODELS = ("reverse", "reverse-repeats")
GRAPHS = ("encoder.onnx", "decoder.onnx")
# the largest |ONNX - PyTorch| allowed, by output: float32's rounding, summed over
# a few dozen operations in another order (logits reach about ±30, weights 1)
TOLERANCE = {
    "memory": 1e-4,
    "logits": 1e-4,
    "encoder_self": 1e-5,
    "decoder_self": 1e-5,
    "cross": 1e-5,
}
OPSET = 17  # what ONNX Runtime Web runs


@contextlib.contextmanager
def recorded_weights(
    attentions: Sequence[MultiHeadAttention],
) -> Iterator[list[Tensor]]:
    """Within the block, the list yielded gets the weights (B, h, T, S) that each of
    ``attentions`` computes, in their order: ``weights_recorded``'s hooks, removed
    after the block."""
    weights: list[Tensor] = []
    hooks = [weights_recorded(attention, weights) for attention in attentions]
    try:
        yield weights
    finally:
        for hook in hooks:
            hook.remove()


class EncoderGraph(nn.Module):
    """What encoder.onnx computes: src (1, S) -> memory (1, S, d_model) and the
    encoder's self-attention weights (L_enc, h, S, S), by the reference stack."""

    def __init__(self, model: Transformer, pad_id: int):
        super().__init__()
        self.model, self.pad_id = model, pad_id

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        model = self.model
        attentions = [layer.self_attn for layer in model.encoder.layers]
        with recorded_weights(attentions) as encoder_self:
            x = model.positional(model.src_embed(src))  # (1, S, d_model)
            memory = model.encoder(x, padding_mask(src, self.pad_id))
        # one source: (1, h, S, S) per layer -> (L_enc, h, S, S)
        return memory, torch.cat(encoder_self)


class DecoderGraph(nn.Module):
    """What decoder.onnx computes: src (1, S), memory (1, S, d_model), tgt_in (1, T)
    -> logits (1, T, V), decoder_self (L_dec, h, T, T), cross (L_dec, h, T, S)."""

    def __init__(self, model: Transformer, pad_id: int):
        super().__init__()
        self.model, self.pad_id = model, pad_id

    def forward(
        self, src: Tensor, memory: Tensor, tgt_in: Tensor
    ) -> tuple[Tensor, Tensor, Tensor]:
        model = self.model
        layers = model.decoder.layers
        causal = subsequent_mask(tgt_in.size(1), device=tgt_in.device)  # (T, T)
        with (
            recorded_weights([layer.self_attn for layer in layers]) as decoder_self,
            recorded_weights([layer.cross_attn for layer in layers]) as cross,
        ):
            x = model.positional(model.tgt_embed(tgt_in))  # (1, T, d_model)
            src_mask = padding_mask(src, self.pad_id)  # (1, 1, S)
            hidden = model.decoder(x, memory, src_mask, causal)
        logits = model.output_projection(hidden)  # (1, T, V)
        return logits, torch.cat(decoder_self), torch.cat(cross)


@torch.no_grad()
def export_graphs(model: Transformer, pad_id: int, folder: Path) -> None:
    """Write encoder.onnx and decoder.onnx of ``model`` (in eval mode) to ``folder``.

    TorchScript's exporter traces the graphs on one small example with S and T
    marked dynamic: deterministic, a fraction of a second. Its warnings say that
    Python values become constants: d_k's square root, and the check of a length
    against max_positions, which the page makes itself (model.json).
    """
    # ids any vocabulary has, no padding; S != T and neither 1: no length is taken
    # for another, or for a broadcast
    src = torch.tensor([[3, 4, 5, 6, 2]])  # (1, S = 5)
    tgt_in = torch.tensor([[1, 3, 4]])  # (1, T = 3)
    encoder = EncoderGraph(model, pad_id)
    memory, _ = encoder(src)
    seq = {1: "S"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        # the TorchScript exporter is deprecated, and says so
        warnings.filterwarnings("ignore", "You are using the legacy TorchScript")
        warnings.filterwarnings("ignore", category=DeprecationWarning, module="torch")
        torch.onnx.export(
            encoder, (src,), folder / "encoder.onnx", dynamo=False,
            opset_version=OPSET, input_names=["src"],
            output_names=["memory", "encoder_self"],
            dynamic_axes={"src": seq, "memory": seq, "encoder_self": {2: "S", 3: "S"}},
        )  # fmt: skip
        torch.onnx.export(
            DecoderGraph(model, pad_id), (src, memory, tgt_in),
            folder / "decoder.onnx", dynamo=False, opset_version=OPSET,
            input_names=["src", "memory", "tgt_in"],
            output_names=["logits", "decoder_self", "cross"],
            dynamic_axes={
                "src": seq, "memory": seq, "tgt_in": {1: "T"}, "logits": {1: "T"},
                "decoder_self": {2: "T", 3: "T"}, "cross": {2: "T", 3: "S"},
            },
        )  # fmt: skip


def source_alphabet(task: Task) -> list[str]:
    """The tokens a source may hold: those the task's own rule takes as a source."""
    tokenizer = task.src_tokenizer
    specials = {tokenizer.pad, tokenizer.bos, tokenizer.eos}
    alphabet = []
    for token in tokenizer.tokens:
        if token not in specials:
            with contextlib.suppress(ValueError):
                task.target(token)
                alphabet.append(token)
    return alphabet


def model_description(
    name: str, model: Transformer, task: Task, folder: Path
) -> dict[str, object]:
    """model.json's content for the graphs in ``folder``."""
    if task.src_tokenizer != task.tgt_tokenizer:
        raise ValueError(f"{name}: the explorer needs one vocabulary for both sides")
    tokenizer, config = task.tgt_tokenizer, model.config
    return {
        "name": name,
        "tokens": list(tokenizer.tokens),
        "pad_id": tokenizer.pad_id,
        "bos_id": tokenizer.bos_id,
        "eos_id": tokenizer.eos_id,
        "source_alphabet": source_alphabet(task),
        "min_source_length": task.source_lengths[0],
        "max_source_length": task.source_lengths[-1],
        "extra_length": task.decoding.extra_length,
        "max_positions": config.max_positions,
        "encoder_layers": config.encoder_layers,
        "decoder_layers": config.decoder_layers,
        "heads": config.h,
        "sha256": {graph: file_digest(folder / graph) for graph in GRAPHS},
    }


class ExportedModel:
    """The graphs of an export folder, run by onnxruntime as the page runs them."""

    def __init__(self, folder: Path):
        import onnxruntime  # only where exports are checked

        self.description = json.loads((folder / "model.json").read_text())
        for graph, digest in self.description["sha256"].items():
            if file_digest(folder / graph) != digest:
                raise ValueError(f"{folder / graph}: sha256 differs from model.json's")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self.encoder, self.decoder = (
            onnxruntime.InferenceSession(folder / graph, options) for graph in GRAPHS
        )

    def run(self, src: np.ndarray, tgt_in: np.ndarray) -> dict[str, np.ndarray]:
        """Every output of both graphs for src (1, S) and tgt_in (1, T), by name."""
        memory, encoder_self = self.encoder.run(None, {"src": src})
        feeds = {"src": src, "memory": memory, "tgt_in": tgt_in}
        logits, decoder_self, cross = self.decoder.run(None, feeds)
        return dict(memory=memory, encoder_self=encoder_self, logits=logits,
                    decoder_self=decoder_self, cross=cross)  # fmt: skip

    def greedy(self, src: np.ndarray, max_len: int) -> list[int]:
        """The page's decoding loop: from <s>, the decoder on the whole prefix, the
        argmax of its last position, until </s> or ``max_len`` tokens (<s> left out)."""
        bos, eos = self.description["bos_id"], self.description["eos_id"]
        (memory, _), tokens = self.encoder.run(None, {"src": src}), [bos]
        while len(tokens) <= max_len and tokens[-1] != eos:
            tgt_in = np.array([tokens], dtype=np.int64)
            feeds = {"src": src, "memory": memory, "tgt_in": tgt_in}
            logits = self.decoder.run(["logits"], feeds)[0]  # (1, T, V)
            tokens.append(int(logits[0, -1].argmax()))
        return tokens[1:]


@torch.no_grad()
def pytorch_outputs(
    model: Transformer, src: Tensor, tgt_in: Tensor, pad_id: int
) -> dict[str, np.ndarray]:
    """What the graphs compute, by the model itself: its encode and forward, and the
    weights ``attention_maps`` reads, each stacked (layers, h, queries, keys)."""
    src_mask = padding_mask(src, pad_id)
    maps = attention_maps(model, src, tgt_in, src_mask)
    outputs = {kind: torch.cat(weights) for kind, weights in maps.items()}
    outputs["memory"] = model.encode(src, src_mask)
    outputs["logits"] = model(src, tgt_in, src_mask)
    return {name: output.numpy() for name, output in outputs.items()}


def check_sources(task: Task) -> list[str]:
    """The sources an export is checked on: one of the task's shortest, one of middle
    length, one of its longest, drawn with a fixed seed."""
    lengths = task.source_lengths
    generator = torch.Generator().manual_seed(0)
    return [
        task.sample(1, generator, length=length)[0]
        for length in (lengths[0], lengths[len(lengths) // 2], lengths[-1])
    ]


def source_differences(
    exported: ExportedModel, model: Transformer, task: Task, source: str
) -> dict[str, float]:
    """The largest |ONNX - PyTorch| of each output for one source, decoded greedily
    by the graphs; a ValueError if they write other tokens than ``greedy_decode``.

    The outputs compared are those of the decoder's last step (its whole input), as
    the page shows them.
    """
    ids = exported.description
    src = source_ids(task, [source])  # (1, S)
    limit = min(src.size(1) - 1 + ids["extra_length"], ids["max_positions"])
    tokens = exported.greedy(src.numpy(), limit)
    special = ids["pad_id"], ids["bos_id"], ids["eos_id"]
    expected = greedy_decode(model, src, *special, limit)[0].tolist()
    if tokens != expected:
        raise ValueError(f"{source!r}: ONNX writes {tokens}, PyTorch {expected}")
    tgt_in = torch.tensor([[ids["bos_id"], *tokens[:-1]]])  # (1, T)
    onnx = exported.run(src.numpy(), tgt_in.numpy())
    pytorch = pytorch_outputs(model, src, tgt_in, ids["pad_id"])
    return {name: float(np.abs(onnx[name] - pytorch[name]).max()) for name in onnx}


@torch.no_grad()
def check_export(
    folder: Path, model: Transformer, task: Task, sources: Sequence[str]
) -> dict[str, float]:
    """The largest |ONNX - PyTorch| of each output over ``sources``; a ValueError if
    an output differs by more than TOLERANCE, if greedy decoding by the graphs writes
    other tokens than ``greedy_decode``, or if a graph is not the one model.json
    names."""
    exported = ExportedModel(folder)
    with evaluation_mode(model):
        each = [source_differences(exported, model, task, s) for s in sources]
    # np.max, not max: a NaN stays NaN
    largest = {name: float(np.max([d[name] for d in each])) for name in TOLERANCE}
    for name, difference in largest.items():
        if not difference <= TOLERANCE[name]:  # NaN too
            raise ValueError(
                f"{folder}: {name} differs from PyTorch by {difference:.1e} "
                f"(tolerance {TOLERANCE[name]:.0e})"
            )
    return largest


def write_export(model: Transformer, task: Task, name: str, folder: Path) -> None:
    """Write the graphs of ``model`` (in eval mode) and their model.json to
    ``folder``, unchecked: ``export_explorer`` checks before it writes."""
    folder.mkdir(parents=True, exist_ok=True)
    with evaluation_mode(model):
        export_graphs(model, task.src_tokenizer.pad_id, folder)
    description = model_description(name, model, task, folder)
    (folder / "model.json").write_text(json.dumps(description, indent=1) + "\n")


def export_explorer(state: TrainState, folder: Path, name: str) -> dict[str, float]:
    """Export the averaged model of ``state`` (as ``predict`` uses it) into ``folder``
    as the explorer's ``name``, once ``check_export`` has passed on ``check_sources``:
    its largest differences from PyTorch. A ValueError, and nothing written, if not.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    model, task = state.averaged_model(), state.task
    with tempfile.TemporaryDirectory(dir=folder.parent) as scratch:
        draft = Path(scratch)
        write_export(model, task, name, draft)
        differences = check_export(draft, model, task, check_sources(task))
        folder.mkdir(exist_ok=True)
        for file in (*GRAPHS, "model.json"):
            os.replace(draft / file, folder / file)
    return differences


def export_book_model(name: str, outdir: Path) -> str:
    """Export the book model ``name`` to outdir/name: a line saying what was written."""
    started = time.perf_counter()
    folder = Path(outdir) / name
    differences = export_explorer(book_model(name), folder, name)
    sizes = ", ".join(
        f"{file} {(folder / file).stat().st_size / 1000:.0f} KB"
        for file in (*GRAPHS, "model.json")
    )
    agreement = ", ".join(f"{key} {value:.1e}" for key, value in differences.items())
    return (
        f"{name}: {sizes} in {time.perf_counter() - started:.1f} s; largest "
        f"|ONNX - PyTorch|: {agreement}"
    )


def export_cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aiayn.book.explorer", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("outdir", type=Path, help="a folder per model goes here")
    parser.add_argument(
        "names", nargs="*", default=list(EXPLORER_MODELS),
        help=f"book models to export; default {' '.join(EXPLORER_MODELS)}",
    )  # fmt: skip
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in BOOK_MODELS]
    if unknown:
        parser.error(f"no book model {unknown}: choose from {', '.join(BOOK_MODELS)}")
    for name in args.names:
        try:
            print(export_book_model(name, args.outdir), flush=True)
        except ValueError as error:
            print(f"{name}: not exported: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(export_cli())
