"""The command line: train, evaluate, predict; resume, interruption, locking, bad input.

Most tests call ``main`` in this process (fast); the ones about signals, concurrent runs
and what a real process prints run ``python -m aiayn`` as a subprocess.
"""

import contextlib
import io
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
import torch
from filelock import FileLock

from aiayn.cli import main
from aiayn.train.checkpoints import load_checkpoint

ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1"}  # two processes may share two cores
TINY_RUN = [
    "train",
    "--task",
    "copy",
    "--batch-size",
    "8",
    "--eval-size",
    "20",
    "--device",
    "cpu",
]  # the same numbers on every machine
# a run that only a signal ends: no evaluation reaches an exact match of 2
ENDLESS = ["--steps", "100000", "--target-exact-match", "2"]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def run_main(*args, stdin: bytes = b"") -> Result:
    """``python -m aiayn ARGS`` in this process: exit status, stdout, stderr."""
    stdout, stderr = io.StringIO(), io.StringIO()
    real_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                status = main([str(a) for a in args])
            except SystemExit as exit_:  # argparse: --help, and its own errors
                status = exit_.code
    finally:
        sys.stdin = real_stdin
    return Result(status, stdout.getvalue(), stderr.getvalue())


PYTHON_M = [sys.executable, "-m"]  # python -m aiayn
# python -m aiayn where there is no fcntl module, as on Windows
WITHOUT_FCNTL = [
    sys.executable,
    "-c",
    "import runpy, sys; sys.modules['fcntl'] = None; "
    "runpy.run_module('aiayn', run_name='__main__', alter_sys=True)",
]


def aiayn(*args, stdin: bytes = b"", env=None, python=PYTHON_M) -> Result:
    """``python -m aiayn ARGS`` in a fresh process."""
    module = ["aiayn"] if python == PYTHON_M else []
    done = subprocess.run(
        [*python, *module, *map(str, args)],
        input=stdin,
        capture_output=True,
        timeout=300,
        env=env or ONE_THREAD,
    )
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())


def start(*args, python=PYTHON_M) -> subprocess.Popen:
    """Start ``python -m aiayn ARGS``, with SIGINT handled as in a terminal."""
    module = ["aiayn"] if python == PYTHON_M else []
    return subprocess.Popen(
        [*python, *module, *map(str, args)],
        stderr=subprocess.PIPE,
        text=True,
        env=ONE_THREAD,
        # a shell starts background jobs with SIGINT ignored, and Python keeps it
        # ignored: give the run the default handling, as in a terminal
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def wait_for_step(process: subprocess.Popen, step: int) -> str:
    """Read the progress bar on stderr until it shows ``step`` finished (or the end)."""
    seen = ""
    while character := process.stderr.read(1):
        seen += character
        done = re.findall(r"\| *(\d+)/\d+ \[", seen[-200:])
        if done and int(done[-1]) >= step:
            break
    return seen


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Runs in this process use one thread too: with two cores, perhaps shared, more
    threads only wait for each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("runs") / "copy.pt"
    result = run_main(*TINY_RUN, "--out", path, "--steps", 20, "--quiet")
    assert result.returncode == 0, result.stderr
    assert re.search(
        r"copy: 20 steps in [\d.]+ s, validation exact match [\d.]+ on 20 ",
        result.stdout,
    )
    return path


def test_help_describes_every_command():
    result = run_main("--help")
    assert result.returncode == 0
    for command in ("train", "evaluate", "predict"):
        assert command in result.stdout
    train_help = run_main("train", "--help").stdout
    assert "--resume" in train_help and "--force" in train_help


def test_the_command_line_does_not_load_matplotlib():
    """Only the chapters draw: every `python -m aiayn` process starts without it."""
    loaded = subprocess.run(
        [sys.executable, "-c",
         "import sys, aiayn.cli; print('matplotlib' in sys.modules)"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert loaded.strip() == "False"


def test_evaluate_prints_exact_match_and_token_accuracy(checkpoint):
    result = run_main("evaluate", "--checkpoint", checkpoint, "--n", 50, "--length", 4)
    assert result.returncode == 0, result.stderr
    assert re.search(r"exact match:\s+[01]\.\d{4}", result.stdout)
    assert re.search(r"token accuracy:\s+[01]\.\d{4}", result.stdout)
    assert "50 held-out sources of length 4, test split" in result.stdout
    validation = run_main(
        "evaluate", "--checkpoint", checkpoint, "--split", "validation", "--n", 30
    )
    assert "30 held-out sources, validation split" in validation.stdout
    assert "decoding:       greedy" in validation.stdout


def test_evaluate_with_a_beam(checkpoint):
    options = ("evaluate", "--checkpoint", checkpoint, "--n", 40)
    greedy, one_beam = run_main(*options), run_main(*options, "--beam", 1)
    assert one_beam.stdout == greedy.stdout  # one beam is greedy decoding
    beam = run_main(*options, "--beam", 4, "--alpha", 0.6)
    assert beam.returncode == 0, beam.stderr
    assert "decoding:       beam search, beam 4, alpha 0.6, stops at no" in beam.stdout
    assert re.search(r"exact match:\s+[01]\.\d{4}", beam.stdout)


def test_predict_from_arguments_and_from_standard_input(checkpoint):
    from_args = run_main("predict", "--checkpoint", checkpoint, "1 2 3", "4 5")
    assert from_args.returncode == 0, from_args.stderr
    assert len(from_args.stdout.splitlines()) == 2
    from_stdin = run_main(
        "predict", "--checkpoint", checkpoint, stdin=b"1 2 3\n\n4 5\n"
    )
    assert from_stdin.stdout == from_args.stdout  # blank lines are skipped


def test_predict_with_a_beam(checkpoint):
    greedy = run_main("predict", "--checkpoint", checkpoint, "1 2 3", "4 5")
    one_beam = run_main(
        "predict", "--checkpoint", checkpoint, "--beam", 1, "1 2 3", "4 5"
    )
    assert one_beam.stdout == greedy.stdout  # one beam is greedy decoding
    beam = run_main(
        "predict",
        "--checkpoint",
        checkpoint,
        "--beam",
        4,
        "--alpha",
        0.6,
        "1 2 3",
        "4 5",
    )
    assert beam.returncode == 0, beam.stderr
    assert len(beam.stdout.splitlines()) == 2


def test_resume_continues_to_more_steps(checkpoint, tmp_path):
    path = tmp_path / "resumed.pt"
    shutil.copy(checkpoint, path)
    result = run_main(*TINY_RUN, "--out", path, "--resume", "--steps", 25, "--quiet")
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stderr and "at step 20" in result.stderr
    assert load_checkpoint(path).step == 25


def test_saving_leaves_other_files_alone(tmp_path):
    unrelated = tmp_path / "run.tmp"  # what the old save used as its temporary file
    unrelated.write_text("someone else's")
    out = tmp_path / "run.pt"
    result = run_main(*TINY_RUN, "--out", out, "--steps", 2, "--quiet")
    assert result.returncode == 0, result.stderr
    assert unrelated.read_text() == "someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pt", "run.tmp"]


# --- bad input: one line on stderr, exit status 2, nothing written --------------------


def existing_run(tmp_path, checkpoint):
    shutil.copy(checkpoint, tmp_path / "run.pt")


def plain_file(tmp_path, checkpoint):
    (tmp_path / "plain").write_text("not a directory")


def read_only_directory(tmp_path, checkpoint):
    (tmp_path / "read-only").mkdir(mode=0o500)


def run_in_progress(tmp_path, checkpoint):
    """Hold the lock of run.pt as another process's run would (returned: held)."""
    lock = FileLock(tmp_path / "run.pt.lock", timeout=0)
    lock.acquire()
    writer = tmp_path / "run.pt.writer"
    writer.write_text("pid 4242: python -m aiayn train --out run.pt\n")
    return lock


def corrupt_checkpoints(tmp_path, checkpoint):
    """run.pt, and run.pt broken in three ways."""
    existing_run(tmp_path, checkpoint)
    (tmp_path / "truncated.pt").write_bytes(checkpoint.read_bytes()[:1000])
    saved = torch.load(checkpoint, weights_only=True)
    weights = saved["model"]
    saved["snapshots"] = [
        {name: w[..., :1] for name, w in weights.items()}
    ]  # wrong shapes
    torch.save(saved, tmp_path / "bad-snapshot.pt")
    saved["snapshots"] = [{"not.a.weight": torch.zeros(1)}]
    torch.save(saved, tmp_path / "foreign-snapshot.pt")


def no_setup(tmp_path, checkpoint):
    pass


def case(args, setup, message, skip_if=False, reason=""):
    """One row of the table; ``{tmp}`` in args and message is the test's directory."""
    marks = pytest.mark.skipif(skip_if, reason=reason) if skip_if else ()
    return pytest.param(args, setup, message, marks=marks, id=message)


CUDA, MPS = torch.cuda.is_available(), torch.backends.mps.is_available()
TRAIN = [*TINY_RUN, "--out"]
BAD_INPUT = [
    # train: option values
    case([*TRAIN, "{tmp}/x.pt", "--task", "sort"], no_setup, "unknown task 'sort'"),
    case(
        [*TRAIN, "{tmp}/x.pt", "--eval-size", "0"],
        no_setup,
        "--eval-size: '0' is not a",
    ),
    case(
        [*TRAIN, "{tmp}/x.pt", "--steps", "0"],
        no_setup,
        "--steps: '0' is not a positive",
    ),
    case([*TRAIN, "{tmp}/x.pt", "--steps", "-5"], no_setup, "--steps: '-5' is not a"),
    case(
        [*TRAIN, "{tmp}/x.pt", "--batch-size", "0"],
        no_setup,
        "--batch-size: '0' is not",
    ),
    case(
        [*TRAIN, "{tmp}/x.pt", "--device", "cuda"],
        no_setup,
        "--device cuda is not available",
        skip_if=CUDA,
        reason="this machine has CUDA",
    ),
    case(
        [*TRAIN, "{tmp}/x.pt", "--device", "cuda:9"],
        no_setup,
        "--device cuda:9 is not available",
    ),
    case(
        [*TRAIN, "{tmp}/x.pt", "--device", "mps"],
        no_setup,
        "--device mps is not available",
        skip_if=MPS,
        reason="this machine has MPS",
    ),
    case(
        [*TRAIN, "{tmp}/x.pt", "--device", "tpu"], no_setup, "--device 'tpu' is not cpu"
    ),
    case(
        [*TRAIN, "{tmp}/x.pt", "--device", "cpu", "--cuda-graph"],
        no_setup,
        "cuda_graph needs a CUDA device, not cpu",
    ),
    case(
        [*TRAIN, "{tmp}/x.pt", "--device", "garbage"], no_setup, "--device 'garbage' is"
    ),
    # train: the output file
    case([*TRAIN, "{tmp}"], no_setup, "--out {tmp} is a directory"),
    case(
        [*TRAIN, "{tmp}/plain/x.pt"],
        plain_file,
        "lies under {tmp}/plain, which is a file",
    ),
    case(
        [*TRAIN, "{tmp}/read-only/x.pt"],
        read_only_directory,
        "read-only is not writable",
        skip_if=os.geteuid() == 0,
        reason="root may write anywhere",
    ),
    case([*TRAIN, "{tmp}/run.pt"], existing_run, "run.pt already exists: add --resume"),
    case(
        [*TRAIN, "{tmp}/run.pt"],
        run_in_progress,
        "run.pt is being written by another run (pid 4242: python -m aiayn train",
    ),
    # train --resume: a checkpoint that agrees with the options
    case(
        [*TRAIN, "{tmp}/run.pt", "--resume"],
        no_setup,
        "--resume: there is no checkpoint {tmp}/run.pt to continue",
    ),
    case(
        [*TRAIN, "{tmp}/run.pt", "--resume", "--force"],
        existing_run,
        "not allowed with",
    ),
    case(
        [*TRAIN, "{tmp}/run.pt", "--resume", "--task", "reverse"],
        existing_run,
        "--task reverse conflicts with copy in {tmp}/run.pt",
    ),
    case(
        [*TRAIN, "{tmp}/run.pt", "--resume", "--seed", "7"],
        existing_run,
        "--seed 7 conflicts with 0",
    ),
    case(
        [*TRAIN, "{tmp}/run.pt", "--resume", "--batch-size", "4"],
        existing_run,
        "--batch-size 4 conflicts with 8",
    ),
    case(
        [*TRAIN, "{tmp}/run.pt", "--resume", "--eval-size", "5"],
        existing_run,
        "--eval-size 5 conflicts with 20",
    ),
    case(
        [*TRAIN, "{tmp}/run.pt", "--resume", "--steps", "10"],
        existing_run,
        "--steps 10: {tmp}/run.pt has done 20 already",
    ),
    case(
        [*TRAIN, "{tmp}/bad-snapshot.pt", "--resume"],
        corrupt_checkpoints,
        "bad-snapshot.pt is not a readable aiayn checkpoint",
    ),
    # evaluate
    case(
        ["evaluate", "--checkpoint", "{tmp}/missing.pt"],
        no_setup,
        "checkpoint {tmp}/missing.pt not found",
    ),
    case(
        ["evaluate", "--checkpoint", "{tmp}/run.pt", "--n", "0"],
        existing_run,
        "--n: '0' is not a positive whole number",
    ),
    case(
        ["evaluate", "--checkpoint", "{tmp}/run.pt", "--length", "12"],
        existing_run,
        "--length 12 is outside 1..10",
    ),
    case(
        ["evaluate", "--checkpoint", "{tmp}/run.pt", "--length", "0"],
        existing_run,
        "--length 0 is outside 1..10",
    ),
    case(
        ["evaluate", "--checkpoint", "{tmp}/run.pt", "--split", "train"],
        existing_run,
        "invalid choice: 'train'",
    ),
    # predict
    case(
        ["predict", "--checkpoint", "{tmp}/truncated.pt", "1 2"],
        corrupt_checkpoints,
        "truncated.pt is not a readable aiayn checkpoint",
    ),
    case(
        ["predict", "--checkpoint", "{tmp}/foreign-snapshot.pt", "1 2"],
        corrupt_checkpoints,
        "foreign-snapshot.pt is not a readable aiayn checkpoint",
    ),
    case(
        ["predict", "--checkpoint", "{tmp}/run.pt", "1 a 2"],
        existing_run,
        "['a'] are not digits",
    ),
    case(
        ["predict", "--checkpoint", "{tmp}/run.pt", " ".join("1" * 11)],
        existing_run,
        "has 11 tokens",
    ),
    case(
        ["predict", "--checkpoint", "{tmp}/run.pt", ""],
        existing_run,
        "'' is an empty sequence",
    ),
    case(
        ["predict", "--checkpoint", "{tmp}/run.pt", "1", "  "],
        existing_run,
        "'  ' is an empty sequence",
    ),
    case(
        ["predict", "--checkpoint", "{tmp}/run.pt", "--beam", "0", "1 2"],
        existing_run,
        "--beam: '0' is not a positive whole number",
    ),
    case(
        ["predict", "--checkpoint", "{tmp}/run.pt", "--beam", "2.5", "1 2"],
        existing_run,
        "--beam: '2.5' is not a positive whole number",
    ),
    case(
        ["predict", "--checkpoint", "{tmp}/run.pt", "--alpha", "nan", "1 2"],
        existing_run,
        "--alpha: 'nan' is not a finite number",
    ),
    case(
        ["predict", "--checkpoint", "{tmp}/run.pt", "--alpha", "high", "1 2"],
        existing_run,
        "--alpha: 'high' is not a finite number",
    ),
]


def files_under(directory) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.rglob("*")}


@pytest.mark.parametrize(("args", "setup", "message"), BAD_INPUT)
def test_bad_input_is_one_line_exit_status_2_and_writes_nothing(
    args, setup, message, checkpoint, tmp_path
):
    _held = setup(
        tmp_path, checkpoint
    )  # a lock that setup took stays held until the end
    before = files_under(tmp_path)
    result = run_main(*(arg.format(tmp=tmp_path) for arg in args))
    assert result.returncode == 2
    assert message.format(tmp=tmp_path) in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr  # no traceback
    assert files_under(tmp_path) == before


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["predict", "--checkpoint", "CORRUPT", "1 2"], b"", "not a readable aiayn"),
        (
            ["predict", "--checkpoint", "CHECKPOINT"],
            b"1 2\n\xff\xfe\n",
            "not utf-8 text",
        ),
        (["train", "--out", "CHECKPOINT", "--device", "cuda:9"], b"", "not available"),
    ],
)
def test_a_real_process_prints_one_line_too(args, stdin, message, checkpoint, tmp_path):
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(checkpoint.read_bytes()[:1000])
    args = [{"CHECKPOINT": checkpoint, "CORRUPT": corrupt}.get(a, a) for a in args]
    result = aiayn(*args, stdin=stdin, env={**ONE_THREAD, "PYTHONIOENCODING": "utf-8"})
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.splitlines()) == 1, (
        result.stderr
    )  # no warning, no traceback


# --- interruption and concurrent runs -------------------------------------------------


def test_a_run_interrupted_at_random_moments_resumes_bit_for_bit(tmp_path):
    command = [*TINY_RUN, "--steps", "40", "--out"]
    straight = tmp_path / "straight.pt"
    assert aiayn(*command, straight, "--quiet").returncode == 0
    interrupted = tmp_path / "interrupted.pt"
    moments = random.Random(0)
    for first, last in [(3, 10), (15, 22), (27, 34)]:  # a step of each third of the run
        resume = ["--resume"] if interrupted.exists() else []
        process = start(*command, interrupted, *resume)
        wait_for_step(process, moments.randint(first, last))
        time.sleep(moments.uniform(0, 0.05))  # then anywhere in the next step or two
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=120)
        assert process.returncode == 130, rest
        saved = load_checkpoint(interrupted).step
        assert f"interrupted by SIGINT after step {saved}: saved" in rest
    result = aiayn(*command, interrupted, "--resume", "--quiet")
    assert result.returncode == 0, result.stderr
    ours, theirs = (torch.load(p, weights_only=True) for p in (interrupted, straight))
    assert ours["step"] == theirs["step"] == 40
    assert [r["loss"] for r in ours["history"]] == [
        r["loss"] for r in theirs["history"]
    ]
    for name, weight in theirs["model"].items():
        assert torch.equal(ours["model"][name], weight), name


def test_a_second_run_on_the_same_out_is_refused_and_sigterm_saves(tmp_path):
    out = tmp_path / "run.pt"
    first = start(*TINY_RUN, *ENDLESS, "--out", out)
    wait_for_step(first, 1)
    second = aiayn(*TINY_RUN, "--out", out, "--quiet")
    assert second.returncode == 2
    assert f"being written by another run (pid {first.pid}: python -m aiayn train" in (
        second.stderr
    )
    assert len(second.stderr.splitlines()) == 1, second.stderr
    first.send_signal(signal.SIGTERM)
    _, rest = first.communicate(timeout=120)
    assert first.returncode == 143
    assert "interrupted by SIGTERM" in rest and "--resume" in rest
    assert 0 < load_checkpoint(out).step < 100000
    assert [p.name for p in tmp_path.iterdir()] == [
        "run.pt"
    ]  # no lock, no temporary file


def test_without_fcntl_a_run_is_locked_interrupted_and_resumed(tmp_path):
    """Where Python has no fcntl (Windows), filelock locks another way; the rest of
    the command line does not need it."""
    probe = subprocess.run(
        [*WITHOUT_FCNTL[:2], "import sys; sys.modules['fcntl'] = None; "
         "import filelock, aiayn.cli; print(filelock.FileLock.__name__)"],
        capture_output=True,
        text=True,
        env=ONE_THREAD,
    )
    assert probe.stdout.strip() == "SoftFileLock", probe.stderr
    command = [*TINY_RUN, "--quiet", "--out"]
    out = tmp_path / "run.pt"
    first = start(*TINY_RUN, *ENDLESS, "--out", out, python=WITHOUT_FCNTL)
    wait_for_step(first, 5)
    second = aiayn(*command, out, python=WITHOUT_FCNTL)
    assert second.returncode == 2
    assert f"being written by another run (pid {first.pid}:" in second.stderr
    first.send_signal(signal.SIGINT)
    _, rest = first.communicate(timeout=120)
    assert first.returncode == 130, rest
    steps = load_checkpoint(out).step + 20
    resumed = aiayn(*command, out, "--resume", "--steps", steps, python=WITHOUT_FCNTL)
    assert resumed.returncode == 0, resumed.stderr
    straight = tmp_path / "straight" / "run.pt"
    assert aiayn(*command, straight, "--steps", steps).returncode == 0
    ours, theirs = (torch.load(p, weights_only=True) for p in (out, straight))
    assert ours["step"] == theirs["step"] == steps
    for name, weight in theirs["model"].items():
        assert torch.equal(ours["model"][name], weight), name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pt", "straight"]
