"""Time greedy decoding with and without the key/value cache.

    python -m aiayn.tools.bench_decoding                  # the base model, 2 threads
    python -m aiayn.tools.bench_decoding --lengths 16 32 --repeats 3

An untrained model of the paper's base configuration (Table 3; eval mode, no dropout)
decodes a batch of random sources. Its end token is -1, an id no token has, so both
paths take exactly ``length`` steps. The two paths take turns; the median wall-clock
time of ``repeats`` runs is printed for each output length, with the speed-up of the
cache.
"""

import argparse
import statistics
import time

import torch

from aiayn.decoding import greedy_decode
from aiayn.model.transformer import Transformer, TransformerConfig

PAD_ID, BOS_ID = 0, 1
NEVER = -1  # the end token: no token has this id, every output has the full length


def decode_times(
    config: TransformerConfig,
    batch_size: int = 8,
    src_len: int = 32,
    lengths: tuple[int, ...] = (16, 32, 64, 128),
    repeats: int = 3,
    seed: int = 0,
) -> dict[int, dict[str, float]]:
    """Median seconds of greedy_decode per output length, {"cached", "recomputed"}."""
    torch.manual_seed(seed)
    model = Transformer(config).eval()
    src = torch.randint(2, config.src_vocab, (batch_size, src_len))
    results = {}
    for length in lengths:
        times: dict[str, list[float]] = {"cached": [], "recomputed": []}
        for repeat in range(repeats):
            order = ["cached", "recomputed"][:: 1 if repeat % 2 == 0 else -1]
            for name in order:
                start = time.perf_counter()
                out = greedy_decode(
                    model,
                    src,
                    PAD_ID,
                    BOS_ID,
                    NEVER,
                    length,
                    use_cache=name == "cached",
                )
                times[name].append(time.perf_counter() - start)
                assert out.shape == (batch_size, length)
        results[length] = {name: statistics.median(t) for name, t in times.items()}
    return results


def decoding_cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=1000, help="source and target")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = TransformerConfig(src_vocab=args.vocab, tgt_vocab=args.vocab)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU")
    print(
        f"base model (d_model {config.d_model}, {config.encoder_layers}+"
        f"{config.decoder_layers} layers, vocab {args.vocab}), untrained, eval; "
        f"batch {args.batch_size}, source length {args.src_len}; "
        f"median of {args.repeats}"
    )
    results = decode_times(
        config, args.batch_size, args.src_len, tuple(args.lengths), args.repeats
    )
    print("| output length | recomputed (s) | cached (s) | speed-up |")
    print("| ---: | ---: | ---: | ---: |")
    for length, t in results.items():
        speedup = t["recomputed"] / t["cached"]
        print(
            f"| {length} | {t['recomputed']:.3f} | {t['cached']:.3f} | {speedup:.1f}x |"
        )


if __name__ == "__main__":
    decoding_cli()
