"""The command line: train -> evaluate -> predict on a tiny run, resume, Ctrl-C, bad input."""

import re
import signal
import subprocess
import sys

import pytest
import torch

from aiayn.training import load_checkpoint


def aiayn(*args, stdin=None):
    return subprocess.run(
        [sys.executable, "-m", "aiayn", *map(str, args)],
        input=stdin, capture_output=True, text=True, timeout=300,
    )


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("runs") / "copy.pt"
    result = aiayn("train", "--task", "copy", "--out", path, "--steps", 20, "--batch-size", 16,
                   "--eval-size", 20, "--quiet")
    assert result.returncode == 0, result.stderr
    assert re.search(r"copy: 20 steps in [\d.]+ s, exact match [\d.]+ on 20 ", result.stdout)
    return path


def test_help_describes_every_command():
    result = aiayn("--help")
    assert result.returncode == 0
    for command in ("train", "evaluate", "predict"):
        assert command in result.stdout
    assert "--resume" in aiayn("train", "--help").stdout


def test_evaluate_prints_exact_match_and_token_accuracy(checkpoint):
    result = aiayn("evaluate", "--checkpoint", checkpoint, "--n", 50, "--length", 4)
    assert result.returncode == 0, result.stderr
    assert re.search(r"exact match:\s+[01]\.\d{4}", result.stdout)
    assert re.search(r"token accuracy:\s+[01]\.\d{4}", result.stdout)
    assert "50 of length 4" in result.stdout


def test_predict_from_arguments_and_from_standard_input(checkpoint):
    from_args = aiayn("predict", "--checkpoint", checkpoint, "1 2 3", "4 5")
    assert from_args.returncode == 0, from_args.stderr
    assert len(from_args.stdout.splitlines()) == 2
    from_stdin = aiayn("predict", "--checkpoint", checkpoint, stdin="1 2 3\n\n4 5\n")
    assert from_stdin.stdout == from_args.stdout  # blank lines are skipped


def test_resume_continues_to_more_steps(checkpoint, tmp_path):
    path = tmp_path / "resumed.pt"
    path.write_bytes(checkpoint.read_bytes())
    result = aiayn("train", "--out", path, "--resume", "--steps", 25, "--quiet")
    assert result.returncode == 0, result.stderr
    assert "resuming" in result.stderr and "at step 20" in result.stderr
    assert load_checkpoint(path).step == 25


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--task", "sort", "--out", "x.pt"], "unknown task 'sort'"),
        (["evaluate", "--checkpoint", "missing.pt"], "checkpoint missing.pt not found"),
        (["predict", "--checkpoint", "CORRUPT", "1 2"], "is not a readable aiayn checkpoint"),
        (["predict", "--checkpoint", "CHECKPOINT", "1 a 2"], "['a'] are not digits"),
        (["predict", "--checkpoint", "CHECKPOINT", " ".join("1" * 11)], "has 11 tokens"),
        (["evaluate", "--checkpoint", "CHECKPOINT", "--length", "12"], "--length 12 is outside"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_2(args, message, checkpoint, tmp_path):
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(checkpoint.read_bytes()[:1000])  # a truncated file
    args = [{"CHECKPOINT": checkpoint, "CORRUPT": corrupt}.get(a, a) for a in args]
    result = aiayn(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # no traceback


def test_ctrl_c_saves_a_checkpoint_that_resumes(tmp_path):
    path = tmp_path / "interrupted.pt"
    process = subprocess.Popen(
        [sys.executable, "-m", "aiayn", "train", "--task", "reverse", "--out", str(path),
         "--steps", "100000", "--batch-size", "8", "--eval-size", "20",
         "--target-exact-match", "1.1"],  # never reached: only Ctrl-C ends this run
        stderr=subprocess.PIPE, text=True,
        # a shell starts background jobs with SIGINT ignored, and Python keeps it ignored:
        # give the run the default handling, as in a terminal, wherever the tests are started
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    seen = ""
    while not re.search(r"\| *[1-9]\d*/100000", seen):  # the progress bar shows a finished step
        character = process.stderr.read(1)
        assert character, f"training ended before it could be interrupted: {seen}"
        seen += character
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=120)
    assert process.returncode == 130
    assert "--resume" in rest
    interrupted = load_checkpoint(path)
    assert 0 < interrupted.step < 100000
    result = aiayn("train", "--out", path, "--resume", "--steps", interrupted.step + 3, "--quiet")
    assert result.returncode == 0, result.stderr
    resumed = torch.load(path, weights_only=False)
    assert resumed["step"] == interrupted.step + 3
