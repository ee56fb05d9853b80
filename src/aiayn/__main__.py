"""Command line: train a toy task, evaluate a checkpoint, predict from the shell.

    python -m aiayn train --task reverse-repeats --out runs/reverse-repeats.pt
    python -m aiayn evaluate --checkpoint runs/reverse-repeats.pt --n 10000 --length 10
    python -m aiayn predict --checkpoint runs/reverse-repeats.pt "0 1 5 9 0 3 5 2 5"

Bad input (an unknown task, a missing or corrupt checkpoint, a token outside the vocabulary, an
over-long sequence) ends with a one-line error and exit status 2.
"""

import argparse
import sys
from pathlib import Path

from aiayn.tasks import TASKS, get_task
from aiayn.training import TrainConfig, evaluate, load_checkpoint, new_run, predict, train


class UsageError(Exception):
    """A problem with what the user asked for: reported in one line, exit status 2."""


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.command(args)
    except UsageError as error:
        print(f"aiayn {args.command_name}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aiayn",
        description="Train, evaluate and run the Transformer of 'Attention Is All You Need' "
        "on toy sequence tasks.",
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    defaults = TrainConfig()

    p = commands.add_parser(
        "train",
        help="train a model on a toy task",
        description="Train a model on a toy task; the checkpoint is saved after every "
        "evaluation, at the end, and on Ctrl-C, so an interrupted run can --resume.",
    )
    p.add_argument("--task", default=defaults.task, help=f"one of: {', '.join(TASKS)}")
    p.add_argument("--out", required=True, type=Path, help="checkpoint file to write")
    p.add_argument("--steps", type=int, help=f"optimizer steps (default {defaults.steps})")
    p.add_argument("--seed", type=int, help=f"random seed (default {defaults.seed})")
    p.add_argument("--batch-size", type=int, help=f"default {defaults.batch_size}")
    p.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    p.add_argument(
        "--eval-size",
        type=int,
        help=f"length-10 sources per periodic evaluation (default {defaults.eval_size})",
    )
    p.add_argument(
        "--target-exact-match", type=float, help="stop once an evaluation reaches this fraction"
    )
    p.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(command=run_train, command_name="train")

    p = commands.add_parser(
        "evaluate",
        help="exact match and token accuracy of a checkpoint",
        description="Greedy-decode fresh random sources and report exact match and token "
        "accuracy.",
    )
    p.add_argument("--checkpoint", required=True, type=Path)
    p.add_argument("--n", type=int, default=10_000, help="sources to decode (default 10000)")
    p.add_argument("--length", type=int, default=10, help="source length (default 10)")
    p.add_argument("--seed", type=int, default=1234, help="seed of the sources (default 1234)")
    p.set_defaults(command=run_evaluate, command_name="evaluate")

    p = commands.add_parser(
        "predict",
        help="predict the output for sequences",
        description="Print the model's output for each SEQUENCE (space-separated digits); "
        "with none, read one sequence per line from standard input.",
    )
    p.add_argument("--checkpoint", required=True, type=Path)
    p.add_argument("sequences", nargs="*", metavar="SEQUENCE", help='e.g. "0 1 5 9 0 3 5 2 5"')
    p.set_defaults(command=run_predict, command_name="predict")
    return parser


def run_train(args: argparse.Namespace) -> int:
    if args.resume and args.out.exists():
        state = open_checkpoint(args.out)
        if args.steps is not None:
            state.config.steps = args.steps
        print(f"resuming {args.out} at step {state.step}", file=sys.stderr)
    else:
        task = known_task(args.task)
        overrides = {
            name: getattr(args, name)
            for name in ("steps", "seed", "batch_size", "device", "eval_size", "target_exact_match")
            if getattr(args, name) is not None
        }
        config = TrainConfig(task=task.name, **overrides)
        state = new_run(config)
    try:
        train(state, checkpoint=args.out, progress=not args.quiet)
    except KeyboardInterrupt:
        print(
            f"\ninterrupted at step {state.step}: saved {args.out}; continue with "
            f"`python -m aiayn train --out {args.out} --resume`",
            file=sys.stderr,
        )
        return 130
    last = next(r for r in reversed(state.history) if "exact_match" in r)
    print(
        f"{state.config.task}: {state.step} steps in {state.seconds:.1f} s, "
        f"exact match {last['exact_match']:.4f} on {state.config.eval_size} length-10 sources; "
        f"saved {args.out}"
    )
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    state = open_checkpoint(args.checkpoint)
    task = state.task
    if not 1 <= args.length <= task.max_len:
        raise UsageError(f"--length {args.length} is outside 1..{task.max_len} for {task.name}")
    model = state.averaged_model()
    scores = evaluate(model, task, n=args.n, length=args.length, seed=args.seed)
    print(f"task:           {task.name}")
    print(f"sources:        {args.n} of length {args.length}")
    print(f"exact match:    {scores['exact_match']:.4f}")
    print(f"token accuracy: {scores['token_accuracy']:.4f}")
    return 0


def run_predict(args: argparse.Namespace) -> int:
    state = open_checkpoint(args.checkpoint)
    task = state.task
    sequences = args.sequences or [line for line in sys.stdin.read().splitlines() if line.strip()]
    for sequence in sequences:
        try:
            length = len(task.tokenize(sequence))
        except ValueError as error:
            raise UsageError(f"{error} in {sequence!r}") from None
        if length > task.max_len:
            raise UsageError(
                f"{sequence!r} has {length} tokens; {task.name} was trained on at most "
                f"{task.max_len}"
            )
    for prediction in predict(state.averaged_model(), task, sequences):
        print(prediction)
    return 0


def known_task(name: str):
    try:
        return get_task(name)
    except ValueError as error:
        raise UsageError(str(error)) from None


def open_checkpoint(path: Path):
    if not path.is_file():
        raise UsageError(f"checkpoint {path} not found")
    try:
        return load_checkpoint(path)
    except Exception as error:  # a truncated or foreign file fails in many different ways
        reason = type(error).__name__
        raise UsageError(f"{path} is not a readable aiayn checkpoint ({reason})") from None


if __name__ == "__main__":
    sys.exit(main())
