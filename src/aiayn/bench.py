"""Time a training step (forward + backward) of our Transformer and nn.Transformer.

    python -m aiayn.bench                                    # the two presets
    python -m aiayn.bench --d-model 64 --nhead 2 --num-encoder-layers 1

Both models get the same padded batch, the same masks (source padding; target padding
and causal), the same embedding and output layers, and the same loss. After a warm-up
the two models take turns, each going first every other round; the medians and their
ratio are printed, for wall-clock time and for the CPU time of the process (steadier on
a busy machine).
"""

import argparse
import dataclasses
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.embeddings import PositionalEncoding, TokenEmbedding
from aiayn.interop import to_key_padding_mask, to_torch_mask
from aiayn.masks import padding_mask, subsequent_mask, target_mask
from aiayn.model import Transformer

PAD_ID = 0  # the benchmark's random batches pad with id 0


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """Defaults: the toy tasks' training configuration (aiayn.training.TrainConfig)."""

    d_model: int = 64
    nhead: int = 4
    num_encoder_layers: int = 3
    num_decoder_layers: int = 3
    dim_feedforward: int = 256
    dropout: float = 0.0
    batch_size: int = 256
    src_len: int = 12  # digits, then </s>
    tgt_len: int = 12
    vocab: int = 14


PRESETS = {
    "toy": BenchConfig(),
    "larger": BenchConfig(  # with the paper's dropout
        d_model=256, dim_feedforward=1024, dropout=0.1, batch_size=64,
        src_len=24, tgt_len=24, vocab=1000,
    ),
}  # fmt: skip


class TorchTransformer(nn.Module):
    """nn.Transformer between the embedding and output layers of our Transformer."""

    def __init__(self, cfg: BenchConfig):
        super().__init__()
        self.src_embed = TokenEmbedding(cfg.vocab, cfg.d_model)
        self.tgt_embed = TokenEmbedding(cfg.vocab, cfg.d_model)
        self.positional = PositionalEncoding(cfg.d_model, dropout=cfg.dropout)
        self.transformer = nn.Transformer(
            cfg.d_model, cfg.nhead, cfg.num_encoder_layers, cfg.num_decoder_layers,
            cfg.dim_feedforward, cfg.dropout, batch_first=True,
        )  # fmt: skip
        # nn.Transformer ends both stacks with a LayerNorm; the post-LN paper
        # model (ours) doesn't.
        self.transformer.encoder.norm = None
        self.transformer.decoder.norm = None
        self.output_projection = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
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
    tokens = torch.randint(1, cfg.vocab, (cfg.batch_size, length), generator=generator)
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


def build_models(cfg: BenchConfig) -> tuple[Transformer, TorchTransformer]:
    ours = Transformer(
        src_vocab=cfg.vocab, tgt_vocab=cfg.vocab, d_model=cfg.d_model,
        nhead=cfg.nhead, num_encoder_layers=cfg.num_encoder_layers,
        num_decoder_layers=cfg.num_decoder_layers,
        dim_feedforward=cfg.dim_feedforward, dropout=cfg.dropout,
    )  # fmt: skip
    return ours, TorchTransformer(cfg)


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


def cli() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Without model or batch options both presets run (toy, larger); with"
        " any of them, one configuration: the options given, the toy preset for the"
        " rest.",
    )
    for field in dataclasses.fields(BenchConfig):
        flag = "--" + field.name.replace("_", "-")
        parser.add_argument(flag, type=field.type, help=f"toy preset: {field.default}")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per model")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps per model")
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count(), help="torch threads"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    chosen = {f.name: getattr(args, f.name) for f in dataclasses.fields(BenchConfig)}
    chosen = {name: value for name, value in chosen.items() if value is not None}
    configs = {"custom": BenchConfig(**chosen)} if chosen else PRESETS
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")
    for name, cfg in configs.items():
        medians = run(cfg, args.steps, args.warmup)
        print(f"{name}: {cfg}")
        for i, clock in enumerate(("wall-clock", "CPU time")):
            ours, theirs = medians["ours"][i], medians["pytorch"][i]
            print(
                f"  {clock:10s}  ours {ours:8.2f} ms   nn.Transformer {theirs:8.2f} ms"
                f"   ratio ours/PyTorch {ours / theirs:.3f}"
            )


if __name__ == "__main__":
    cli()
