"""Chapter kernels that start warm: forked from a process that imported their libraries.

A chapter's kernel spends seconds of CPU before its first cell, importing ipykernel,
torch and matplotlib (and, with its first optimizer, ``torch._dynamo``), and the book
has dozens of chapters. As a pytest plugin (``-p tests.warm_kernels``), this starts one
process for the whole pytest run (in the process that is not an xdist worker; the
workers share it), the *zygote*, which imports those libraries once and then forks a
kernel for every notebook that nbval opens. The kernel is the same IPython kernel a
reader's JupyterLab starts (``ipykernel_launcher``), in the notebook's folder, with the
environment, arguments and standard streams that nbval gave it; only its imports are
done.

How a kernel is started (nbval asks jupyter_client, which starts the kernel spec's
command, here ``python warm_kernels.py launch -f CONNECTION_FILE``):

1. the *launcher* connects to the zygote's socket and sends its arguments, folder and
   environment, and its standard streams (file descriptors);
2. the zygote forks: the child starts a session of its own, sends the launcher its
   process id, takes the rest over and becomes the kernel;
3. the launcher stands in for the kernel towards jupyter_client: it passes on every
   signal it can catch (an interrupt, a termination) to the kernel's process group, and
   exits when the kernel exits (the kernel holds the connection open while it lives). If
   the launcher is killed, the kernel sees the connection close and kills its process
   group, as the kill would have if it had reached them; if the pytest process that
   started the launcher ends, the launcher kills them too.

Where no zygote listens (it failed to start), the launcher becomes a kernel started from
scratch: slower, not wrong. A launcher that fails midway costs the zygote nothing.

The zygote imports no module of the book's library (``aiayn`` reads the environment
when imported); it sets ``MPLBACKEND`` as ipykernel would, before importing matplotlib.
Each kernel draws fresh seeds for Python's and NumPy's global random generators, as a
new process would. What the zygote's libraries read when they were imported stays the
zygote's: variables such as ``OMP_NUM_THREADS`` and ``PYTHONHASHSEED`` (one hash seed
for every kernel), matplotlib's settings files. The zygote runs with the pytest run's
environment, which nbval passes on to its kernels unchanged.
"""

import json
import os
import signal
import socket
import sys

# ipykernel's own choice of matplotlib backend, made before matplotlib is imported
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
SOCKET_VARIABLE = "AIAYN_KERNEL_ZYGOTE"  # where a launcher finds the zygote
STREAMS = (0, 1, 2)  # stdin, stdout, stderr
HANDSHAKE_SECONDS = 30.0  # the most a launcher's request may take to arrive


# --- the plugin -----------------------------------------------------------------------


def pytest_configure(config):
    """Start the zygote in the pytest process that is not an xdist worker (its workers
    inherit its environment, and with it the zygote's address); in every process, have
    nbval's kernels started through it."""
    from nbval import kernel

    if not hasattr(config, "workerinput"):
        import tempfile

        folder = tempfile.mkdtemp(prefix="aiayn-kernels-")
        path = os.path.join(folder, "zygote")
        try:
            config._warm_kernels = start_zygote(path)
        except OSError as why:  # a socket path too long, say: cold kernels
            print(f"warm kernels: no zygote ({why}), cold kernels", file=sys.stderr)
            os.rmdir(folder)
        else:
            os.environ[SOCKET_VARIABLE] = path
    plain_spec = kernel.NbvalKernelspecManager.get_kernel_spec

    def get_kernel_spec(manager, kernel_name):
        spec = plain_spec(manager, kernel_name)
        if kernel_name == kernel.CURRENT_ENV_KERNEL_NAME:
            # [python, -m, ipykernel_launcher, -f, {connection_file}]
            assert spec.argv[1:3] == ["-m", "ipykernel_launcher"], spec.argv
            spec.argv = [sys.executable, __file__, "launch", *spec.argv[3:]]
        return spec

    kernel.NbvalKernelspecManager.get_kernel_spec = get_kernel_spec


def pytest_unconfigure(config):
    zygote = getattr(config, "_warm_kernels", None)
    if zygote is not None:
        import shutil
        import subprocess

        zygote.terminate()
        try:
            zygote.wait(timeout=30)
        except subprocess.TimeoutExpired:
            zygote.kill()
            zygote.wait()
        shutil.rmtree(os.path.dirname(os.environ[SOCKET_VARIABLE]))


# --- the zygote -----------------------------------------------------------------------


def start_zygote(path: str):
    """Start the zygote, listening at ``path``: a subprocess.Popen. The socket listens
    before this returns, so that a launcher never finds it missing; the zygote accepts
    its connections once its imports are done."""
    import subprocess

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(8)
        command = [sys.executable, __file__, "serve", str(listener.fileno())]
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, pass_fds=[listener.fileno()]
        )


def serve(listening: str) -> None:
    """Import what every kernel imports, then fork a kernel for each launcher that
    connects to the socket ``listening`` (a file descriptor)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    parent = os.getppid()
    listener = socket.socket(fileno=int(listening))
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)
    # torch._dynamo, the front end of PyTorch's compiler, a large package: PyTorch
    # imports it when a process makes its first optimizer, as most chapters do (loading
    # a run makes one too)
    import ipykernel.kernelapp  # noqa: F401
    import matplotlib.pyplot  # noqa: F401
    import numpy  # noqa: F401
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the system reaps the kernels
    listener.settimeout(1.0)
    while os.getppid() == parent:  # ends with the pytest process that started it
        try:
            connection, _ = listener.accept()
        except TimeoutError:
            continue
        with connection:
            connection.settimeout(HANDSHAKE_SECONDS)  # a stalled launcher: the next one
            try:
                request, streams = receive_request(connection)
            except (OSError, ValueError):  # the launcher died, or is not one
                continue
            if os.fork() == 0:
                listener.close()
                become_kernel(connection, request, streams)
            for stream in streams:
                os.close(stream)


def receive_request(connection: socket.socket) -> tuple[dict, list[int]]:
    """A launcher's request (one line of JSON) and the streams sent with it."""
    data, streams, _, _ = socket.recv_fds(connection, 1 << 16, len(STREAMS))
    try:
        while not data.endswith(b"\n"):
            more = connection.recv(1 << 16)
            if not more:
                raise ConnectionError("a launcher closed its connection mid-request")
            data += more
        request = json.loads(data)
        if len(streams) != len(STREAMS):
            raise ValueError(f"{len(streams)} streams sent, not {len(STREAMS)}")
    except (OSError, ValueError):
        for stream in streams:
            os.close(stream)
        raise
    return request, streams


def become_kernel(connection: socket.socket, request: dict, streams: list[int]):
    """In the forked child: take over the launcher's streams, folder, environment and
    arguments, and run the IPython kernel as ``python -m ipykernel_launcher`` would;
    exit as that process would when the kernel ends."""
    import random
    import threading
    from importlib.util import find_spec

    import numpy
    from ipykernel import kernelapp

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.setsid()  # a process group of its own: an interrupt reaches it and its children
    connection.settimeout(None)
    connection.sendall(f"{os.getpid()}\n".encode())  # the group exists: signal it
    for target, stream in zip(STREAMS, streams, strict=True):
        os.dup2(stream, target)
        os.close(stream)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = [find_spec("ipykernel_launcher").origin, *request["argv"]]
    if "JPY_PARENT_PID" in os.environ:
        # read by ipykernel when the zygote imported it, unset then: the kernel's own
        # (ipykernel then logs as under jupyter_client, and exits if orphaned)
        sys.argv.append(f"--IPKernelApp.parent_handle={os.environ['JPY_PARENT_PID']}")
    del sys.path[0]  # this file's folder; ipykernel_launcher removes its own
    random.seed()
    numpy.random.seed()
    threading.Thread(target=exit_with_launcher, args=(connection,), daemon=True).start()
    kernelapp.launch_new_instance()
    sys.exit()


def exit_with_launcher(connection: socket.socket) -> None:
    """The launcher never writes after its request: end of data means it is gone,
    killed; the kill is carried on to the kernel's process group."""
    while connection.recv(1):
        pass
    os.killpg(0, signal.SIGKILL)


# --- the launcher ---------------------------------------------------------------------


def launch(arguments: list[str]) -> None:
    """Have the zygote fork a kernel with these arguments; stand in for it until it
    exits. Without a zygote listening, become a kernel started from scratch."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(os.environ[SOCKET_VARIABLE])
    except (KeyError, OSError) as why:
        print(f"no kernel zygote ({why!r}): a cold kernel", file=sys.stderr)
        python = [sys.executable, "-m", "ipykernel_launcher"]
        os.execv(sys.executable, [*python, *arguments])
    request = {"argv": arguments, "cwd": os.getcwd(), "env": dict(os.environ)}
    message = json.dumps(request).encode() + b"\n"
    socket.send_fds(connection, [message], list(STREAMS))
    reply = b""
    while not reply.endswith(b"\n"):
        more = connection.recv(64)
        if not more:
            sys.exit("the kernel zygote closed the connection before starting a kernel")
        reply += more
    kernel = int(reply)

    def pass_on(signum, _frame):
        try:
            os.killpg(kernel, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(signum, pass_on)
    parent = os.getppid()
    connection.settimeout(1.0)
    while True:
        try:
            if not connection.recv(64):  # b"": the kernel has exited
                return
        except TimeoutError:
            if os.getppid() != parent:  # the pytest process is gone: so is the kernel
                pass_on(signal.SIGKILL, None)
                return


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "serve":
        serve(*rest)
    elif command == "launch":
        launch(rest)
    else:
        sys.exit(f"unknown command {command!r}: serve PATH or launch ARGUMENTS")
