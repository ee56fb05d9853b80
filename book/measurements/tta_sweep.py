"""The exploration behind TrainConfig's defaults (issue #11): steps to 99% and 99.9%.

Run on one H100 (torch 2.11, CUDA), many variants at once, one process each, before
few_digits_share and the new defaults existed in the library (the old defaults are
pinned below); so the few-digit sources ("rich") are drawn here by ``rich_sources``:
the same distribution as
``aiayn.tasks.training_data.training_sources`` (a share of the sources takes its digits from a
random set of 1 to 5), another order of random draws. Each variant trains with
``train_step`` and, every 50 steps, greedy-decodes the 10,000 length-10 test sources
with the raw and the averaged model; a run stops when either reaches 99.95%. The
results are the four ``tta_sweep*.jsonl`` files among the book's measurements
(``aiayn.book.models.MEASUREMENTS``), and the variants below are
``tta_sweep_plan.json`` beside them, which the appendix reads (a test checks that it
is this file's):

    M=src/aiayn/book/measurements
    PYTHONPATH=src python book/measurements/tta_sweep.py --out $M/tta_sweep1.jsonl \
        --jobs 16 --steps 3000 --variants base rich50 ...   # the names below

The seconds in the results are not comparable between variants: 8 to 16 runs shared
one GPU.

A record of what ran, not a tool: it patches functions of the library as it was then
(its training-source sampler and schedule), which have since moved and changed, so it
runs only against that library: the commits of ``git log --follow`` on this file.
"""
import argparse, dataclasses, json, os, sys, time, itertools
import multiprocessing as mp
import torch

VARIANTS = {}
def variant(name, **kw): VARIANTS[name] = kw

# Sweep 1 (lp = length_power, rich = few-digit share, L = layers a side, lr = lr_factor,
# b = batch size; unlisted: TrainConfig's defaults before issue #11, i.e. d_model 64,
# 3 + 3 layers, batch 256, length_power 2, lr_factor 1, warm-up 300, no few-digit
# sources; every variant averages the last 5 snapshots, taken every 20 steps)
variant("base")
variant("rich50", rich=0.5)
variant("rich25", rich=0.25)
variant("rich75", rich=0.75)
variant("L2", layers=2)
variant("L2-rich50", layers=2, rich=0.5)
variant("rich50-b128", rich=0.5, batch_size=128)
variant("rich50-b512", rich=0.5, batch_size=512)
variant("rich50-lr2", rich=0.5, lr_factor=2.0)
variant("rich50-wu100", rich=0.5, warmup_steps=100)
variant("rich50-lp4", rich=0.5, length_power=4.0)
variant("rich50-ls0", rich=0.5, label_smoothing=0.0)
variant("L2-d128-rich50", rich=0.5, layers=2, d_model=128, d_ff=512)
variant("L1-rich50", layers=1, rich=0.5)
variant("E2D1-rich50", enc=2, dec=1, rich=0.5)
variant("L2-rich50-b128-lr2", layers=2, rich=0.5, batch_size=128, lr_factor=2.0)
# Sweep 2 (at most 1500 steps; "decay N": Eq. (3), then linearly to 0 at step N)
variant("lp4-rich50", rich=0.5, length_power=4.0)
variant("lp4-rich75", rich=0.75, length_power=4.0)
variant("E2D1-lp4-rich50", enc=2, dec=1, rich=0.5, length_power=4.0)
variant("d32-lp4-rich50", d_model=32, d_ff=128, rich=0.5, length_power=4.0)
variant("L2-lp4-rich50", layers=2, rich=0.5, length_power=4.0)
variant("lp4-rich50-decay800", rich=0.5, length_power=4.0, decay=800)
variant("lp4-rich50-decay500", rich=0.5, length_power=4.0, decay=500)
variant("E2D1-lp4-rich50-decay800", enc=2, dec=1, rich=0.5, length_power=4.0, decay=800)
variant("lp4-rich50-b512-decay500", rich=0.5, length_power=4.0, batch_size=512, decay=500)
variant("d32-lp4-rich50-decay800", d_model=32, d_ff=128, rich=0.5, length_power=4.0, decay=800)
# Sweep 3 (at most 1500 steps; "avg10": the last 10 snapshots)
variant("L2-lp4-rich50-b512", layers=2, rich=0.5, length_power=4.0, batch_size=512)
variant("lp4-rich50-b512", rich=0.5, length_power=4.0, batch_size=512)
variant("E2D1-lp4-rich50-b512", enc=2, dec=1, rich=0.5, length_power=4.0, batch_size=512)
variant("L2-lp4-rich50-lr2", layers=2, rich=0.5, length_power=4.0, lr_factor=2.0)
variant("L2-lp4-rich50-avg10", layers=2, rich=0.5, length_power=4.0, avg=10)
variant("L2-lp4-rich50-lr05", layers=2, rich=0.5, length_power=4.0, lr_factor=0.5)
# Sweep 4 (at most 1300 steps)
variant("L2-lp4-rich50-lr025", layers=2, rich=0.5, length_power=4.0, lr_factor=0.25)
variant("E2D1-lp4-rich50-lr05", enc=2, dec=1, rich=0.5, length_power=4.0, lr_factor=0.5)
variant("L2-lp4-rich50-lr05-b512", layers=2, rich=0.5, length_power=4.0, lr_factor=0.5, batch_size=512)
variant("E2D1-lp4-rich50-lr05-b512", enc=2, dec=1, rich=0.5, length_power=4.0, lr_factor=0.5, batch_size=512)

def rich_sources(n, generator, length_power, rich, task):
    from aiayn.tasks.training_data import training_sources as plain
    lengths = torch.tensor(task.source_lengths)
    weights = lengths.double() ** length_power
    drawn = lengths[torch.multinomial(weights, n, replacement=True, generator=generator)]
    is_rich = torch.rand(n, generator=generator) < rich
    k = torch.randint(1, 6, (n,), generator=generator)
    k = torch.where(is_rich, k, torch.full_like(k, 10))
    perm = torch.rand(n, 10, generator=generator).argsort(dim=1)
    j = (torch.rand(n, 10, generator=generator) * k[:, None]).long()
    digits = perm.gather(1, j)
    return [" ".join(str(d) for d in row[:L]) for row, L in zip(digits.tolist(), drawn.tolist())]

def run(job):
    name, seed, max_steps, every, device = job
    torch.set_num_threads(1)
    import aiayn.train.loop as T
    from aiayn.train.config import TrainConfig, toy_model_config
    from aiayn.train.loop import train_step
    from aiayn.train.state import new_run
    from aiayn.evaluation import evaluate
    from aiayn.tasks import held_out_sources
    kw = dict(VARIANTS[name])
    rich = kw.pop("rich", 0.0)
    decay = kw.pop("decay", None)
    average_last = kw.pop("avg", 5)
    # TrainConfig's defaults before issue #11, pinned (the library's have changed)
    kw = dict(length_power=2.0, lr_factor=1.0, few_digits_share=0.0, batch_size=256,
              warmup_steps=300, uniform_length_share=0.0, target_exact_match=0.995) | kw
    shape = dict(encoder_layers=3, decoder_layers=3)
    if "layers" in kw:
        L = kw.pop("layers"); shape.update(encoder_layers=L, decoder_layers=L)
    if "enc" in kw: shape["encoder_layers"] = kw.pop("enc")
    if "dec" in kw: shape["decoder_layers"] = kw.pop("dec")
    for f in ("d_model", "d_ff", "h"):
        if f in kw: shape[f] = kw.pop(f)
    config = TrainConfig(model_config=toy_model_config("reverse-repeats", **shape), seed=seed,
                         steps=max_steps, device=device, average_last=average_last, snapshot_every=20, **kw)
    if rich:
        T.training_sources = lambda task, n, g, p, *_: rich_sources(n, g, p, rich, task)
    if decay:
        from aiayn.train.schedule import learning_rate as eq3
        # Eq. (3), then linearly to 0 over the second half of the run
        T.learning_rate = lambda step, d, w, f: eq3(step, d, w, f) * min(1.0, 2 * (decay - step) / decay)
        max_steps = decay
    state = new_run(config)
    test = held_out_sources(state.task, "test", 10_000, length=10)
    seconds, curve = 0.0, []
    while state.step < max_steps:
        t = time.perf_counter()
        train_step(state)
        if state.step % 20 == 0:
            state.take_snapshot()
        if device == "cuda": torch.cuda.synchronize()
        seconds += time.perf_counter() - t
        if state.step % every == 0:
            raw = evaluate(state.model, state.task, test)["exact_match"]
            avg = evaluate(state.averaged_model(), state.task, test)["exact_match"]
            curve.append((state.step, round(seconds, 2), raw, avg))
            if max(raw, avg) >= 0.9995 or (state.step >= 1500 and max(raw, avg) < 0.9):
                break
    return {"variant": name, "seed": seed, "curve": curve}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--out"); ap.add_argument("--jobs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3000); ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS))
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    jobs = [(v, s, a.steps, a.every, a.device) for v in a.variants for s in a.seeds]
    ctx = mp.get_context("spawn")
    with ctx.Pool(a.jobs) as pool, open(a.out, "w") as f:
        for r in pool.imap_unordered(run, jobs):
            f.write(json.dumps(r) + "\n"); f.flush()
            c = r["curve"]
            def first(t): return next((p[0] for p in c if max(p[2], p[3]) >= t), None)
            print(r["variant"], r["seed"], "99%:", first(0.99), "99.9%:", first(0.999), "last:", c[-1] if c else None, flush=True)
