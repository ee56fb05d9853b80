"""Time a training step (forward + backward) of our Transformer and nn.Transformer.

    python -m aiayn.tools.bench                                    # the two presets
    python -m aiayn.tools.bench --d-model 64 --h 2 --layers 1  # your configuration

Both models get the same padded batch, the same masks (source padding; target padding
and causal), the same embedding and output layers, and the same loss. After a warm-up
the two models take turns, each going first every other round; the medians and their
ratio are printed, for wall-clock time and for the CPU time of the process (steadier on
a busy machine). Both models train (training mode): ours then computes its position-wise
layers on the real positions only (aiayn.fast.packing), nn.Transformer on every
position; the padding's share of the batch is printed too.

On Linux the command starts itself again with glibc's malloc thresholds fixed
(FIXED_MALLOC): left to adapt, they couple the two models' allocation costs.
"""

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.fast.transformer import FastTransformer
from aiayn.model.embeddings import PositionalEncoding, TokenEmbedding
from aiayn.model.interop import to_key_padding_mask, to_torch_mask
from aiayn.model.masks import padding_mask, subsequent_mask, target_mask
from aiayn.model.transformer import TransformerConfig

PAD_ID = 0  # the benchmark's random batches pad with id 0


# The book's toy model before TrainConfig's defaults became 2 + 2 layers;
# kept, so that the bench's numbers stay comparable over time.
TOY_MODEL = TransformerConfig(
    src_vocab=14, tgt_vocab=14, d_model=64, h=4, encoder_layers=3,
    decoder_layers=3, d_ff=256, dropout=0.0,
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """The model to time and the batch it trains on (source length: digits, </s>)."""

    model: TransformerConfig = TOY_MODEL
    batch_size: int = 256
    src_len: int = 12
    tgt_len: int = 12


PRESETS = {
    "toy": BenchConfig(),
    "larger": BenchConfig(  # with the paper's dropout
        dataclasses.replace(
            TOY_MODEL, src_vocab=1000, tgt_vocab=1000, d_model=256,
            d_ff=1024, dropout=0.1,
        ),
        batch_size=64, src_len=24, tgt_len=24,
    ),
}  # fmt: skip

# The command line's options: the model's (--layers sets both stacks, --vocab both
# vocabularies), then the batch's.
MODEL_OPTIONS = {
    "d_model": int, "h": int, "layers": int, "d_ff": int,
    "dropout": float, "vocab": int,
}  # fmt: skip
BATCH_OPTIONS = {"batch_size": int, "src_len": int, "tgt_len": int}


def bench_config(**options) -> BenchConfig:
    """The toy preset with some options of the command line changed."""
    model = {}
    for name, value in options.items():
        if name == "layers":
            model.update(encoder_layers=value, decoder_layers=value)
        elif name == "vocab":
            model.update(src_vocab=value, tgt_vocab=value)
        elif name in MODEL_OPTIONS:
            model[name] = value
    batch = {name: value for name, value in options.items() if name in BATCH_OPTIONS}
    return BenchConfig(dataclasses.replace(TOY_MODEL, **model), **batch)


class TorchTransformer(nn.Module):
    """nn.Transformer between the embedding and output layers of our Transformer."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        if cfg.src_vocab != cfg.tgt_vocab or cfg.positional != "sinusoidal":
            raise ValueError("the benchmark needs one vocabulary and sinusoids")
        if cfg.d_k is not None or cfg.d_v is not None:
            raise ValueError("nn.Transformer has no d_k or d_v of its own")
        self.src_embed = TokenEmbedding(cfg.src_vocab, cfg.d_model)
        self.tgt_embed = TokenEmbedding(cfg.tgt_vocab, cfg.d_model)
        self.positional = PositionalEncoding(cfg.d_model, dropout=cfg.dropout)
        self.transformer = nn.Transformer(
            cfg.d_model, cfg.h, cfg.encoder_layers, cfg.decoder_layers,
            cfg.d_ff, cfg.dropout, batch_first=True,
            norm_first=cfg.norm_first,
        )  # fmt: skip
        # nn.Transformer ends both stacks with a LayerNorm; the post-LN paper
        # model (ours) doesn't.
        self.transformer.encoder.norm = None
        self.transformer.decoder.norm = None
        self.output_projection = nn.Linear(cfg.d_model, cfg.tgt_vocab, bias=False)
        self.output_projection.weight = self.tgt_embed.embedding.weight
        self.src_embed.embedding.weight = self.tgt_embed.embedding.weight

    def forward(
        self, src: Tensor, tgt: Tensor, torch_masks: dict[str, Tensor]
    ) -> Tensor:
        src_x, tgt_x = (
            self.positional(self.src_embed(src)),
            self.positional(self.tgt_embed(tgt)),
        )
        return self.output_projection(self.transformer(src_x, tgt_x, **torch_masks))


@dataclasses.dataclass
class BenchBatch:
    src: Tensor  # (B, S)
    tgt_in: Tensor  # (B, T): decoder input
    tgt_out: Tensor  # (B, T): the next tokens, to predict
    src_mask: Tensor  # (B, 1, S), ours: True = may attend
    tgt_mask: Tensor  # (B, T, T)
    # the same masks for nn.Transformer: True = may NOT attend
    torch_masks: dict[str, Tensor]


def padded_tokens(cfg: BenchConfig, length: int, generator: torch.Generator) -> Tensor:
    """(batch_size, length) random tokens; each row ends in some random padding."""
    vocab = cfg.model.tgt_vocab
    tokens = torch.randint(1, vocab, (cfg.batch_size, length), generator=generator)
    lengths = torch.randint(
        length // 2, length + 1, (cfg.batch_size, 1), generator=generator
    )
    return tokens.masked_fill(torch.arange(length) >= lengths, PAD_ID)


def bench_batch(cfg: BenchConfig, seed: int = 0) -> BenchBatch:
    generator = torch.Generator().manual_seed(seed)
    src = padded_tokens(cfg, cfg.src_len, generator)
    tgt = padded_tokens(cfg, cfg.tgt_len + 1, generator)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # teacher forcing: predict the next token
    src_mask = padding_mask(src, PAD_ID)
    torch_masks = {
        "src_key_padding_mask": to_key_padding_mask(src_mask),
        "memory_key_padding_mask": to_key_padding_mask(src_mask),
        "tgt_key_padding_mask": to_key_padding_mask(padding_mask(tgt_in, PAD_ID)),
        "tgt_mask": to_torch_mask(subsequent_mask(cfg.tgt_len)),
    }
    return BenchBatch(
        src, tgt_in, tgt_out, src_mask, target_mask(tgt_in, PAD_ID), torch_masks
    )


def describe_padding(batch: BenchBatch) -> str:
    """'source 25%, target 21%': the share of padding positions on each side."""
    shares = [(tokens == PAD_ID).float().mean() for tokens in (batch.src, batch.tgt_in)]
    return f"source {shares[0]:.0%}, target {shares[1]:.0%}"


def build_models(cfg: BenchConfig) -> tuple[FastTransformer, TorchTransformer]:
    return FastTransformer(cfg.model), TorchTransformer(cfg.model)


def loss_and_backward(model: nn.Module, batch: BenchBatch, *masks) -> None:
    """One training step without the optimizer: forward, cross-entropy, backward."""
    model.zero_grad(set_to_none=True)
    logits = model(batch.src, batch.tgt_in, *masks)  # (B, T, vocab)
    F.cross_entropy(
        logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID
    ).backward()


def timed(step: Callable[[], None]) -> tuple[float, float]:
    """Run ``step`` once: (wall-clock ms, CPU ms of this process, all threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    step()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def run(
    cfg: BenchConfig, steps: int = 30, warmup: int = 5
) -> dict[str, tuple[float, float]]:
    """Median (wall-clock ms, CPU ms) per training step, for "ours" and "pytorch"."""
    torch.manual_seed(0)
    batch = bench_batch(cfg)
    ours, theirs = build_models(cfg)
    train_steps = {
        "ours": lambda: loss_and_backward(ours, batch, batch.src_mask, batch.tgt_mask),
        "pytorch": lambda: loss_and_backward(theirs, batch, batch.torch_masks),
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in train_steps}
    for i in range(warmup + steps):
        order = list(train_steps) if i % 2 == 0 else list(reversed(train_steps))
        for name in order:
            times[name].append(timed(train_steps[name]))
    return {
        name: tuple(
            statistics.median(clock) for clock in zip(*runs[warmup:], strict=True)
        )
        for name, runs in times.items()
    }


# glibc's malloc raises its thresholds for handing freed memory back to the system as
# it frees large blocks, so in one process each model's allocations change the cost of
# the other's: nn.Transformer's toy step took 99-100 ms beside ours on the fused kernel,
# but 114-119 ms once ours used short_sequence_attention. With the thresholds fixed
# before the process starts it took 99-100 ms beside either.
FIXED_MALLOC = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),  # blocks above 32 MiB: mapped apart
    "MALLOC_TRIM_THRESHOLD_": str(2**30),  # keep up to 1 GiB of freed memory
}


def with_fixed_malloc() -> None:
    """On Linux, run this command again with FIXED_MALLOC, unless it already has it."""
    if sys.platform == "linux" and not FIXED_MALLOC.items() <= os.environ.items():
        command = [sys.executable, "-m", "aiayn.tools.bench", *sys.argv[1:]]
        os.execve(sys.executable, command, os.environ | FIXED_MALLOC)


def bench_parser(defaults: dict) -> argparse.ArgumentParser:
    """The options: every model and batch field (``defaults``: the toy preset's), the
    steps, the threads and a JSON file for the medians."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Without model or batch options both presets run (toy, larger); with"
        " any of them, one configuration: the options given, the toy preset for the"
        " rest.",
    )
    for name, kind in {**MODEL_OPTIONS, **BATCH_OPTIONS}.items():
        flag = "--" + name.replace("_", "-")
        parser.add_argument(flag, type=kind, help=f"toy preset: {defaults[name]}")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per model")
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count(), help="torch threads"
    )
    parser.add_argument("--json", help="also write the medians (ms) here")
    return parser


def print_medians(name: str, cfg: BenchConfig, medians: dict) -> None:
    """One configuration's medians, ours against nn.Transformer's, on both clocks."""
    print(f"{name}: {cfg}")
    print(f"  padding: {describe_padding(bench_batch(cfg))} of the positions")
    for i, clock in enumerate(("wall-clock", "CPU time")):
        ours, theirs = medians["ours"][i], medians["pytorch"][i]
        print(
            f"  {clock:10s}  ours {ours:8.2f} ms   nn.Transformer {theirs:8.2f} ms"
            f"   ratio ours/PyTorch {ours / theirs:.3f}"
        )


def cli() -> None:
    with_fixed_malloc()
    toy = bench_config()
    defaults = {
        "d_model": toy.model.d_model, "h": toy.model.h,
        "layers": toy.model.encoder_layers,
        "d_ff": toy.model.d_ff, "dropout": toy.model.dropout,
        "vocab": toy.model.src_vocab, "batch_size": toy.batch_size,
        "src_len": toy.src_len, "tgt_len": toy.tgt_len,
    }  # fmt: skip
    args = bench_parser(defaults).parse_args()
    torch.set_num_threads(args.threads)
    chosen = {name: getattr(args, name) for name in defaults}
    chosen = {name: value for name, value in chosen.items() if value is not None}
    configs = {"custom": bench_config(**chosen)} if chosen else PRESETS
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")
    measured = {}
    for name, cfg in configs.items():
        measured[name] = run(cfg, args.steps, args.warmup)
        print_medians(name, cfg, measured[name])
    if args.json:
        with open(args.json, "w") as file:
            json.dump(
                {
                    "torch": torch.__version__,
                    "threads": torch.get_num_threads(),
                    "clocks": ["wall-clock", "CPU time"],
                    "medians_ms": measured,
                },
                file,
                indent=1,
            )


if __name__ == "__main__":
    cli()
