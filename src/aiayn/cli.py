"""Command line: train a toy task, evaluate a checkpoint, predict from the shell.

    python -m aiayn train --task reverse-repeats --out runs/reverse-repeats.pt
    python -m aiayn evaluate --checkpoint runs/reverse-repeats.pt --n 10000
    python -m aiayn predict --checkpoint runs/reverse-repeats.pt "0 1 5 9 0 3 5 2 5"
    python -m aiayn predict --checkpoint runs/reverse-repeats.pt --beam 4 "1 2"
    python -m aiayn train --task en-de --out runs/en-de.pt
    python -m aiayn predict --checkpoint runs/en-de.pt --beam 4 "twenty-one"

Bad input (an unknown task or option value, an --out that cannot be written or that
another run is writing, a missing or corrupt checkpoint, a token outside the vocabulary,
an empty or over-long sequence) ends with a one-line error and exit status 2, before any
training step and without writing anything.

Ctrl-C (SIGINT) or SIGTERM stops `train` after the step in progress and saves the run:
exit status 130 or 143 (128 + the signal's number, as a shell reports a program killed
by it). The same command with --resume continues it, bit for bit as if it had never
stopped.

Under torchrun, `train` runs on N processes (aiayn.train.distributed), each on a
batch of its own (of --batch-size sources): a global batch of N x --batch-size per
step.

    torchrun --nproc_per_node=2 -m aiayn train --device cpu --out runs/two.pt

Rank 0 alone prints and writes; --resume needs the same N.
"""

import argparse
import math
import sys
from pathlib import Path
from typing import NoReturn

from aiayn.cli_runs import (
    UsageError,
    check_processes,
    check_sequence,
    check_train_options,
    global_batch,
    locked_by_rank_0,
    open_checkpoint,
    standard_input_lines,
)
from aiayn.evaluation import evaluate, predict
from aiayn.tasks import HELD_OUT_SEEDS, TASK_NAMES, Task, get_task, held_out_sources
from aiayn.train import distributed
from aiayn.train.config import TrainConfig, changed_config, task_config
from aiayn.train.loop import TrainingInterrupted
from aiayn.train.run import train_on_task
from aiayn.train.state import TrainState, new_run

# the options of `train` that define a run (of TrainConfig, and the task's training
# options), and those that may extend it on --resume
KEPT_ON_RESUME = ("task", "seed", "eval_size", "device", "cuda_graph")
TASK_OPTIONS = ("batch_size", "max_tokens")
CHANGED_ON_RESUME = ("steps", "target_exact_match")


def is_rank_0() -> bool:
    """Whether this process prints: the only one, or rank 0 of torchrun's."""
    return distributed.rank() == 0


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n" if is_rank_0() else None)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.command(args)
    except UsageError as error:
        if is_rank_0():  # under torchrun, every process found the same error
            print(f"{args.prog}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before training started: nothing to save
        print("\ninterrupted", file=sys.stderr)
        return 130


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def finite_float(text: str) -> float:
    """An argparse type: a number, neither infinite nor NaN."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m aiayn",
        description="Train, evaluate and run the Transformer of 'Attention Is All You "
        "Need' on toy sequence tasks and on number-word translation (en-de, en-fr).",
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    add_train_command(commands)
    add_evaluate_command(commands)
    add_predict_command(commands)
    return parser


TRAIN_DESCRIPTION = (
    "Train a model on a toy task; the checkpoint is saved after every evaluation and "
    "at the end. Ctrl-C or SIGTERM stops after the step in progress and saves it (exit "
    "status 130 or 143): add --resume to the same command to continue. On --resume, "
    "--steps and --target-exact-match may change (to extend the run); --task, --seed, "
    "--batch-size, --eval-size and --device must agree with the checkpoint."
)


def add_train_command(commands: argparse._SubParsersAction) -> None:
    """`train`: its options default to None, so that a resumed run keeps its own."""
    defaults = TrainConfig()
    default_task = get_task(defaults.task)
    p = commands.add_parser(
        "train", help="train a model on a toy task", description=TRAIN_DESCRIPTION
    )
    p.add_argument(
        "--task", help=f"one of: {', '.join(TASK_NAMES)} (default {defaults.task})"
    )
    p.add_argument("--out", required=True, type=Path, help="checkpoint file to write")
    p.add_argument(
        "--steps", type=positive_int, help=f"optimizer steps (default {defaults.steps})"
    )
    p.add_argument("--seed", type=int, help=f"random seed (default {defaults.seed})")
    p.add_argument(
        "--batch-size",
        type=positive_int,
        help=f"sources per batch, for the toy tasks and parse (default "
        f"{default_task.batch_size} for {default_task.name})",
    )
    p.add_argument(
        "--max-tokens",
        type=positive_int,
        help="the translation tasks' token budget per batch (default: theirs)",
    )
    p.add_argument(
        "--device", help="cpu, cuda, cuda:N or mps (default: cuda if available)"
    )
    p.add_argument(
        "--cuda-graph",
        action="store_true",
        default=None,
        help="on a GPU, replay each step's forward and backward pass from a CUDA "
        "graph (faster for small models; one process, batches of one size)",
    )
    p.add_argument(
        "--eval-size",
        type=positive_int,
        help="validation sources per evaluation, of the task's held-out length "
        f"(default {defaults.eval_size})",
    )
    p.add_argument(
        "--target-exact-match",
        type=float,
        help="stop once a validation exact match reaches this fraction (default "
        f"{defaults.target_exact_match}: every validation source right)",
    )
    add_run_options(p)
    p.set_defaults(command=run_train, prog=p.prog)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """--resume or --force for an --out that exists; --quiet."""
    existing = p.add_mutually_exclusive_group()
    existing.add_argument(
        "--resume", action="store_true", help="continue the run in --out"
    )
    existing.add_argument(
        "--force", action="store_true", help="replace the run in --out"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def add_evaluate_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "evaluate",
        help="the task's scores of a checkpoint (exact match, token accuracy, ...)",
        description="Decode held-out sources (greedily, or with --beam) and report "
        "the task's scores: exact match and token accuracy, and the task's own (BLEU "
        "and chrF for translation, labelled-bracket F1 for parsing).",
    )
    p.add_argument("--checkpoint", required=True, type=Path)
    p.add_argument(
        "--split",
        choices=list(HELD_OUT_SEEDS),
        default="test",
        help="validation: the sources training evaluates on; test (default): never "
        "seen by any decision, for the number to report",
    )
    p.add_argument(
        "--n", type=positive_int, default=10_000, help="sources (default 10000)"
    )
    p.add_argument(
        "--length",
        type=int,
        help="source length in tokens (default: the task's held-out length)",
    )
    add_decoding_options(p)
    p.set_defaults(command=run_evaluate, prog=p.prog)


def add_predict_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "predict",
        help="predict the output for sequences",
        description="Print the model's output for each SEQUENCE (space-separated "
        "digits for the toy tasks); with none, read one sequence per line from "
        "standard input.",
    )
    p.add_argument("--checkpoint", required=True, type=Path)
    p.add_argument(
        "sequences", nargs="*", metavar="SEQUENCE", help='e.g. "0 1 5 9 0 3 5 2 5"'
    )
    add_decoding_options(p)
    p.set_defaults(command=run_predict, prog=p.prog)


def add_decoding_options(p: argparse.ArgumentParser) -> None:
    """--beam and --alpha: greedy decoding by default, beam search on request."""
    p.add_argument(
        "--beam",
        type=positive_int,
        default=1,
        help="beam size: 1 (default) decodes greedily; the paper uses 4",
    )
    p.add_argument(
        "--alpha",
        type=finite_float,
        default=0.6,
        help="length penalty of beam search (default 0.6, the paper's)",
    )


def run_train(args: argparse.Namespace) -> int:
    check_train_options(args)
    device = args.device or TrainConfig().device
    check_processes(device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with distributed.process_group(device), locked_by_rank_0(args.out):
        state = resumed_run(args) if args.resume else fresh_run(args)
        if state.world_size > 1 and is_rank_0():
            print(f"training on {global_batch(state)}", file=sys.stderr)
        try:
            train_on_task(state, checkpoint=args.out, progress=not args.quiet)
        except TrainingInterrupted as stop:
            if is_rank_0():
                print(
                    f"\ninterrupted by {stop} after step {state.step}: saved "
                    f"{args.out}; to continue, run the same command with --resume",
                    file=sys.stderr,
                )
            return 128 + stop.signal_number
    if is_rank_0():
        print(summary(state, args.out))
    return 0


def fresh_run(args: argparse.Namespace) -> TrainState:
    if args.out.exists() and not args.force:
        raise UsageError(
            f"{args.out} already exists: add --resume to continue its run or --force "
            "to replace it"
        )
    options = {name: getattr(args, name) for name in KEPT_ON_RESUME + CHANGED_ON_RESUME}
    given = {name: value for name, value in options.items() if value is not None}
    task_options = {
        name: getattr(args, name)
        for name in TASK_OPTIONS
        if getattr(args, name) is not None
    }
    try:  # the task's own defaults (the translation chapter's), then the options
        config = task_config(given.pop("task", TrainConfig.task), **given)
        return new_run(changed_config(config, task_options))
    except ValueError as error:
        raise UsageError(str(error)) from None


def resumed_run(args: argparse.Namespace) -> TrainState:
    state = open_checkpoint(args.out)
    if state.world_size != distributed.world_size():  # in a process group: see there
        raise UsageError(distributed.world_size_error(args.out, state.world_size))
    for name in KEPT_ON_RESUME + TASK_OPTIONS:
        given, saved = getattr(args, name), run_setting(state, name)
        if given is not None and given != saved:
            raise UsageError(
                f"--{name.replace('_', '-')} {given} conflicts with {saved} in "
                f"{args.out}; a resumed run keeps its settings"
            )
    if args.steps is not None and args.steps < state.step:
        raise UsageError(
            f"--steps {args.steps}: {args.out} has done {state.step} already"
        )
    for name in CHANGED_ON_RESUME:
        if getattr(args, name) is not None:
            setattr(state.config, name, getattr(args, name))
    if is_rank_0():
        print(f"resuming {args.out} at step {state.step}", file=sys.stderr)
    return state


def run_setting(state: TrainState, name: str) -> object:
    """A setting of the run: of its configuration, or a training option of its task
    (None if the task has no such option)."""
    if name in TASK_OPTIONS:
        task = state.task
        return getattr(task, name) if name in task.TRAINING_OPTIONS else None
    return getattr(state.config, name)


def summary(state: TrainState, out: Path) -> str:
    """The last line of a run: its length, time, last validation score and file."""
    line = f"{state.config.task}: {state.step} steps in {state.seconds:.1f} s"
    if state.world_size > 1:
        line += f" on {global_batch(state)}"
    evaluations = [r for r in state.history if "val_exact_match" in r]
    if evaluations:
        line += (
            f", validation exact match {evaluations[-1]['val_exact_match']:.4f} on "
            f"{state.config.eval_size} {held_out(None)}"
        )
    return f"{line}; saved {out}"


def run_evaluate(args: argparse.Namespace) -> int:
    state = open_checkpoint(args.checkpoint)
    task = state.task
    lengths = task.source_lengths
    if args.length is not None and args.length not in lengths:
        raise UsageError(
            f"--length {args.length} is outside {lengths.start}..{lengths[-1]} for "
            f"{task.name}"
        )
    try:
        sources = held_out_sources(task, args.split, args.n, length=args.length)
    except ValueError as error:  # a task that draws no sources of a given length
        raise UsageError(f"--length: {error}") from None
    decoding = {"beam_size": args.beam, "alpha": args.alpha}
    scores = evaluate(state.averaged_model(), task, sources, **decoding)
    print(f"{'task:':16}{task.name}")
    print(f"{'sources:':16}{args.n} {held_out(args.length)}, {args.split} split")
    print(f"{'decoding:':16}{decoding_name(args, task)}")
    for name, value in scores.items():
        print(f"{name.replace('_', ' ') + ':':16}{value:.4f}")
    return 0


def held_out(length: int | None) -> str:
    """'held-out sources', or 'held-out sources of length 4'."""
    return "held-out sources" + ("" if length is None else f" of length {length}")


def run_predict(args: argparse.Namespace) -> int:
    state = open_checkpoint(args.checkpoint)
    task = state.task
    sequences = args.sequences or standard_input_lines()
    for sequence in sequences:
        check_sequence(sequence, task)
    model = state.averaged_model()
    decoding = {"beam_size": args.beam, "alpha": args.alpha}
    for prediction in predict(model, task, sequences, **decoding):
        print(prediction)
    return 0


def decoding_name(args: argparse.Namespace, task: Task) -> str:
    """'greedy', or the beam search, and the task's bound on the outputs' length."""
    if args.beam == 1:
        name = "greedy"
    else:
        rule = "k finished" if task.decoding.stop_at_k_finished else "no better beam"
        name = f"beam search, beam {args.beam}, alpha {args.alpha}, stops at {rule}"
    return f"{name}, outputs up to input length + {task.decoding.extra_length}"
