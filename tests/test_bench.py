import os
import sys

import pytest
import torch
from torch.testing import assert_close

from aiayn import TransformerConfig, load_decoder_layer, load_encoder_layer
from aiayn.tools import bench
from aiayn.tools.bench import BenchConfig, bench_batch, bench_config, build_models, run

TINY = BenchConfig(
    TransformerConfig(src_vocab=11, tgt_vocab=11, d_model=16, h=2,
                      encoder_layers=2, decoder_layers=2, d_ff=32,
                      dropout=0.0),
    batch_size=4, src_len=6, tgt_len=5,
)  # fmt: skip


def test_command_line_options_change_the_toy_preset():
    cfg = bench_config(layers=2, vocab=11, d_model=16, batch_size=4)
    assert (cfg.model.encoder_layers, cfg.model.decoder_layers) == (2, 2)
    assert (cfg.model.src_vocab, cfg.model.tgt_vocab) == (11, 11)
    assert (cfg.model.d_model, cfg.model.h, cfg.batch_size) == (16, 4, 4)
    assert bench_config() == BenchConfig()


def test_both_benchmarked_models_compute_the_same_function():
    """With PyTorch's weights loaded into ours, both give the same logits."""
    torch.manual_seed(0)
    ours, theirs = build_models(TINY)
    ours.eval(), theirs.eval()
    batch = bench_batch(TINY)
    assert (batch.src == 0).any() and (batch.tgt_in == 0).any()  # the batch has padding
    with torch.no_grad():
        # all 3 tied
        ours.tgt_embed.embedding.weight.copy_(theirs.tgt_embed.embedding.weight)
    for o, t in zip(
        ours.encoder.layers, theirs.transformer.encoder.layers, strict=True
    ):
        load_encoder_layer(o, t)
    for o, t in zip(
        ours.decoder.layers, theirs.transformer.decoder.layers, strict=True
    ):
        load_decoder_layer(o, t)
    expected = theirs(batch.src, batch.tgt_in, batch.torch_masks)
    # PyTorch may treat padded query rows differently; compare the rest
    real = batch.tgt_in != 0
    assert_close(
        ours(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)[real],
        expected[real],
    )


def test_run_times_both_models():
    medians = run(TINY, steps=2, warmup=1)
    assert set(medians) == {"ours", "pytorch"}
    assert all(ms > 0 for wall_and_cpu in medians.values() for ms in wall_and_cpu)


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's thresholds: Linux only")
def test_the_bench_starts_again_with_fixed_malloc_thresholds_once(monkeypatch):
    started = []
    monkeypatch.setattr(os, "execve", lambda path, args, env: started.append(env))
    monkeypatch.setattr(sys, "argv", ["bench.py", "--threads", "1"])
    for name in bench.FIXED_MALLOC:
        monkeypatch.delenv(name, raising=False)
    bench.with_fixed_malloc()
    assert len(started) == 1 and bench.FIXED_MALLOC.items() <= started[0].items()
    monkeypatch.setattr(os, "environ", started[0])  # the new process: no third start
    bench.with_fixed_malloc()
    assert len(started) == 1
