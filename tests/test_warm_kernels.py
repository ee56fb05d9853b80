"""A kernel forked by tests/warm_kernels.py behaves as a kernel started from scratch.

It runs in the folder and with the environment jupyter_client gave it, draws its own
random numbers, shows matplotlib's figures inline, stops a cell on an interrupt, and
exits when it is shut down or when its launcher is killed (its children too). Where no
zygote listens, the launcher starts a kernel from scratch instead; a broken request does
not end the zygote.
"""

import os
import signal
import socket
import sys
import time
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import KernelManager

from tests import warm_kernels

WARM_KERNELS = Path(warm_kernels.__file__)
ZYGOTE = warm_kernels.SOCKET_VARIABLE  # the variable a launcher reads
IMPORTED_TORCH = "import sys; print('torch' in sys.modules)"  # a cell: True if warm


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    path = tmp_path_factory.mktemp("zygote") / "socket"
    process = warm_kernels.start_zygote(str(path))
    yield path
    process.terminate()
    assert process.wait(timeout=10) == 0


def start_kernel(zygote, folder: Path) -> tuple[KernelManager, object]:
    """A kernel started as nbval starts it, with the warm kernels' spec."""
    manager = KernelManager()
    manager._kernel_spec = KernelSpec(
        argv=[sys.executable, str(WARM_KERNELS), "launch", "-f", "{connection_file}"],
        language="python",
        display_name="warm",
    )
    manager.start_kernel(
        cwd=str(folder),
        env=os.environ | {ZYGOTE: str(zygote), "AIAYN_PROBE": "set"},
    )
    client = manager.client()
    client.start_channels()
    client.wait_for_ready(timeout=60)
    return manager, client


def run(client, code: str, timeout: float = 30) -> list[dict]:
    """Run a cell; the messages it sent on iopub, up to the kernel going idle."""
    msg_id = client.execute(code)
    messages = []
    while True:
        message = client.get_iopub_msg(timeout=timeout)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        if message["msg_type"] != "status":
            messages.append(message)
        elif message["content"]["execution_state"] == "idle":
            return messages


def shell_reply(client, msg_id: str) -> dict:
    """The content of the reply to request msg_id (earlier requests' are skipped)."""
    reply = client.get_shell_msg(timeout=20)
    while reply["parent_header"]["msg_id"] != msg_id:
        reply = client.get_shell_msg(timeout=20)
    return reply["content"]


def is_stream(message: dict, msg_id: str, text: str) -> bool:
    """Whether message is the cell msg_id printing text."""
    return (
        message["parent_header"].get("msg_id") == msg_id
        and message["msg_type"] == "stream"
        and message["content"]["text"].strip() == text
    )


def printed(messages: list[dict]) -> str:
    """What a cell printed."""
    return "".join(m["content"]["text"] for m in messages if m["msg_type"] == "stream")


def test_a_warm_kernel_is_a_kernel_of_its_folder_and_environment(zygote, tmp_path):
    manager, client = start_kernel(zygote, tmp_path)
    try:
        cell = "import os, sys; print(os.getcwd(), os.environ['AIAYN_PROBE'])"
        assert printed(run(client, cell)).split() == [str(tmp_path), "set"]
        # the zygote's imports are done; the folder of warm_kernels.py is not a path
        cell = (
            f"print('torch' in sys.modules, {str(WARM_KERNELS.parent)!r} in sys.path)"
        )
        assert printed(run(client, cell)).split() == ["True", "False"]
        figure = run(
            client, "import matplotlib.pyplot as plt; plt.plot([1, 2]); plt.show()"
        )
        assert any("image/png" in m["content"].get("data", {}) for m in figure)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=False)
    assert not manager.is_alive()


def one_cell(zygote, folder: Path, cell: str) -> str:
    """What a cell printed in a kernel started for it alone."""
    manager, client = start_kernel(zygote, folder)
    try:
        return printed(run(client, cell))
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_without_a_zygote_the_kernel_starts_from_scratch(tmp_path):
    nobody_listens = tmp_path / "no-zygote"
    assert one_cell(nobody_listens, tmp_path, IMPORTED_TORCH).strip() == "False"


def test_two_warm_kernels_draw_different_random_numbers(zygote, tmp_path):
    cell = "import random, numpy; print(random.random(), numpy.random.rand())"
    assert one_cell(zygote, tmp_path, cell) != one_cell(zygote, tmp_path, cell)


def test_an_interrupt_stops_the_cell_and_the_kernel_goes_on(zygote, tmp_path):
    manager, client = start_kernel(zygote, tmp_path)
    try:
        cell = "import time; print('asleep', flush=True); time.sleep(60)"
        # stop_on_error=False: after a failed cell, ipykernel aborts each request that
        # reaches it before it has finished failing, a race the next cell lost in a busy
        # `make test` (its reply: "aborted")
        msg_id = client.execute(cell, stop_on_error=False)
        # interrupted once the cell runs (a busy machine may not have started it yet)
        while not is_stream(client.get_iopub_msg(timeout=30), msg_id, "asleep"):
            pass
        time.sleep(0.2)  # past the print, into the sleep
        manager.interrupt_kernel()
        assert shell_reply(client, msg_id)["ename"] == "KeyboardInterrupt"
        assert printed(run(client, "print(6 * 7)")).strip() == "42"  # it goes on
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_killed_launcher_takes_its_kernel_and_its_children_with_it(zygote, tmp_path):
    manager, client = start_kernel(zygote, tmp_path)
    cell = "import os, subprocess; child = subprocess.Popen(['sleep', '60']); "
    cell += "print(os.getpid(), child.pid)"
    processes = [int(pid) for pid in printed(run(client, cell)).split()]
    client.stop_channels()
    launcher = manager.provisioner.process
    launcher.send_signal(signal.SIGKILL)  # as shutdown_kernel(now=True) ends it
    launcher.wait(timeout=10)
    for _ in range(100):
        if not any(is_running(pid) for pid in processes):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"kernel and child {processes} run after their launcher was killed")
    manager.cleanup_resources()


def is_running(pid: int) -> bool:
    """Whether the process runs (a zombie, killed but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_broken_request_does_not_end_the_zygote(zygote, tmp_path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bad:
        bad.connect(str(zygote))
        bad.sendall(b"not a request\n")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
        gone.connect(str(zygote))  # and closed before sending anything
    assert one_cell(zygote, tmp_path, IMPORTED_TORCH).strip() == "True"  # still warm
