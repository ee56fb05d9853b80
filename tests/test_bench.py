import torch
from torch.testing import assert_close

from aiayn import load_decoder_layer, load_encoder_layer
from aiayn.bench import BenchConfig, bench_batch, build_models, run

TINY = BenchConfig(d_model=16, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                   dim_feedforward=32, dropout=0.0,
                   batch_size=4, src_len=6, tgt_len=5, vocab=11)  # fmt: skip


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
