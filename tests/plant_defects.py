"""Plant one defect at a time in each fast function; record which test catches it.

    PYTHONPATH= OMP_NUM_THREADS=1 .venv/bin/python tests/plant_defects.py . \
        [--only NAME] [--shard I/N]   # --shard: every N-th defect from the I-th

Copies REPO's src/, tests/ and pyproject.toml to a temporary folder, then for each
defect: patches the function's source (found by file and qualified name with ast, not by
line numbers), runs the fast tier's tests with -x, restores the file, and records the
first failing test and its exception. Writes a Markdown table to stdout. A defect
whose first failure is not an AssertionError
(or a torch.testing mismatch) is marked: it crashed rather than computed wrong. Not a
test of the suite: about 9 minutes on one core (shards run side by side in less).

Defects:
- scale: every ``return e`` of the function (not of nested functions) becomes
  ``return (e) * 1.001``; a tuple return scales its first element;
- detach NAME: ``NAME = NAME.detach()`` as the function's first statement;
- text OLD -> NEW: a replacement inside the function's source (a rate p -> p / 2, ...).
"""

import ast
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS = ["tests/test_fast.py", "tests/test_dropout.py", "tests/test_packing.py",
         "tests/test_cache.py"]  # fmt: skip
FAST = "src/aiayn/fast/"

# (file under src/aiayn/fast, qualified function name, defect)
DEFECTS = [
    ("attention.py", "short_sequence_attention", "scale"),
    ("attention.py", "short_sequence_attention", "detach query"),
    ("attention.py", "short_sequence_attention", "detach key"),
    ("attention.py", "short_sequence_attention", "detach value"),
    ("attention.py", "short_sequence_attention", "text dropout_p) -> dropout_p / 2)"),
    ("attention.py", "unpacked", "scale"),
    ("attention.py", "unpacked", "detach x"),
    ("attention.py", "project", "scale"),
    ("attention.py", "project", "detach query"),
    ("attention.py", "project", "detach key"),
    ("attention.py", "project", "detach value"),
    ("attention.py", "project_query", "scale"),
    ("attention.py", "project_query", "detach query"),
    ("attention.py", "project_key_value", "scale"),
    ("attention.py", "project_key_value", "detach key"),
    ("attention.py", "project_key_value", "detach value"),
    ("attention.py", "fused", "scale"),
    ("attention.py", "fused", "detach x"),
    ("attention.py", "heads", "scale"),
    ("attention.py", "heads", "detach x"),
    ("attention.py", "attend", "scale"),
    ("attention.py", "attend", "detach q"),
    ("attention.py", "attend", "detach k"),
    ("attention.py", "attend", "detach v"),
    ("attention.py", "attend", "text attn_dropout.p -> attn_dropout.p / 2"),
    ("layers.py", "residual", "scale"),
    ("layers.py", "residual", "detach x"),
    ("layers.py", "residual", "text dropout.p -> dropout.p / 2"),
    ("layers.py", "feed_forward", "scale"),
    ("layers.py", "feed_forward", "detach x"),
    ("layers.py", "feed_forward", "text ffn.dropout.p -> ffn.dropout.p / 2"),
    ("dropout.py", "dropout", "scale"),
    ("dropout.py", "keep_mask", "scale"),
    ("dropout.py", "keep_mask", "text round(p * -> round(p / 2 *"),
    ("layers.py", "layer_norm", "scale"),
    ("layers.py", "layer_norm", "detach x"),
    ("layers.py", "encoder_layer", "scale"),
    ("layers.py", "encoder_layer", "detach x"),
    ("layers.py", "decoder_layer", "scale"),
    ("layers.py", "decoder_layer", "detach x"),
    ("layers.py", "decoder_layer", "detach memory"),
    ("layers.py", "start_cache", "text memory_keys, memory_values) -> memory_keys * 1.001, memory_values)"),  # noqa: E501
    ("layers.py", "start_cache", "detach memory"),
    ("transformer.py", "encode", "scale"),
    ("transformer.py", "decode", "scale"),
    ("transformer.py", "decode", "detach memory"),
    ("transformer.py", "packed_forward", "scale"),
    ("transformer.py", "packed_forward", "text kernels, source)) -> kernels, source)).detach()"),  # noqa: E501
    ("transformer.py", "FastTransformer.encode", "scale"),
    ("transformer.py", "FastTransformer.decode", "scale"),
    ("transformer.py", "FastTransformer.forward", "scale"),
    ("transformer.py", "packs", "text return ( -> return False and ("),
    ("packing.py", "Packing.from_mask", "text .squeeze(1) -> .squeeze(1)[:-1]"),
    ("packing.py", "Packing.pack", "scale"),
    ("packing.py", "Packing.pack", "detach x"),
    ("packing.py", "Packing.unpack", "scale"),
    ("packing.py", "Packing.unpack", "detach x"),
    ("cache.py", "DecoderCache.length", "text .size(-2) -> .size(-2) - 1"),
    ("cache.py", "DecoderCache.select", "text layer.keys[rows] -> layer.keys[rows] * 1.001"),  # noqa: E501
]  # fmt: skip


def find_function(tree: ast.Module, qualified: str) -> ast.FunctionDef:
    """The def of ``name`` or ``Class.name`` at the module's top level."""
    *owner, name = qualified.split(".")
    scope = tree.body
    if owner:
        scope = next(n for n in tree.body
                     if isinstance(n, ast.ClassDef) and n.name == owner[0]).body  # fmt: skip  # noqa: E501
    return next(n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name)


def own_returns(function: ast.FunctionDef) -> list[ast.Return]:
    """The function's return statements, not those of functions nested in it."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            found.append(node)
        if not isinstance(node, ast.FunctionDef | ast.Lambda | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))
    return found


def offsets(source: str) -> list[int]:
    """The offset in ``source`` of each line's start (line 1 at index 1)."""
    starts, total = [0, 0], 0
    for line in source.splitlines(keepends=True):
        total += len(line)
        starts.append(total)
    return starts


def patched(source: str, qualified: str, defect: str) -> str:
    """``source`` with ``defect`` planted in function ``qualified``."""
    tree = ast.parse(source)
    function = find_function(tree, qualified)
    line_start = offsets(source)

    def position(line: int, column: int) -> int:
        return line_start[line] + column

    begin = position(function.lineno, 0)
    end = position(function.end_lineno, function.end_col_offset)
    if defect == "scale":
        spans = []
        for statement in own_returns(function):
            value = statement.value
            if isinstance(value, ast.Tuple):
                value = value.elts[0]
            spans.append((position(value.lineno, value.col_offset),
                          position(value.end_lineno, value.end_col_offset)))  # fmt: skip  # noqa: E501
        assert spans, f"{qualified} returns nothing"
        for start, stop in sorted(spans, reverse=True):
            source = f"{source[:start]}({source[start:stop]}) * 1.001{source[stop:]}"
        return source
    if defect.startswith("detach "):
        name = defect.split()[1]
        assert name in [a.arg for a in function.args.args], (qualified, name)
        first = function.body[0]
        is_docstring = isinstance(first, ast.Expr) and isinstance(
            first.value, ast.Constant
        )
        anchor = function.body[1] if is_docstring else first
        at = position(anchor.lineno, 0)
        indent = " " * anchor.col_offset
        return f"{source[:at]}{indent}{name} = {name}.detach()\n{source[at:]}"
    old, new = defect.removeprefix("text ").split(" -> ")
    body = source[begin:end]
    assert old in body, (qualified, old)
    return source[:begin] + body.replace(old, new) + source[end:]


def first_failure(output: str) -> tuple[str, str]:
    """The first failing test's id and its first error line, from pytest's output."""
    failed = re.search(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", output, re.MULTILINE)
    error = re.search(r"^E +(\S.*)$", output, re.MULTILINE)
    return (failed.group(1) if failed else "",
            error.group(1)[:100] if error else "")  # fmt: skip


def main() -> None:
    repo = Path(sys.argv[1]).resolve()
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    shard, shards = (map(int, sys.argv[sys.argv.index("--shard") + 1].split("/"))
                     if "--shard" in sys.argv else (0, 1))  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder)
        for part in ("src", "tests"):
            shutil.copytree(repo / part, copy / part,
                            ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
        shutil.copy(repo / "pyproject.toml", copy)
        env = {"PYTHONPATH": str(copy / "src"), "OMP_NUM_THREADS": "1",
               "OMP_WAIT_POLICY": "PASSIVE", "PATH": "/usr/bin:/bin"}  # fmt: skip
        for file, qualified, defect in DEFECTS[shard::shards]:
            if only and only not in qualified:
                continue
            path = copy / FAST / file
            original = path.read_text()
            path.write_text(patched(original, qualified, defect))
            try:
                run = subprocess.run(
                    [sys.executable, "-m", "pytest", "-x", "-q", "-rfE",
                     "-p", "no:cacheprovider", *TESTS],
                    cwd=copy, env=env, capture_output=True, text=True,
                )  # fmt: skip
            finally:
                path.write_text(original)
            test, error = first_failure(run.stdout)
            if run.returncode == 0:
                test = "NOT CAUGHT"
            elif not test:
                test = f"pytest exit {run.returncode}, no failure found"
            crashed = bool(error) and not re.match(
                r"(AssertionError|assert |Tensor-likes|Scalars are not)", error
            )
            rows.append((f"{file}: {qualified}", defect, test,
                         ("crash: " if crashed else "") + error))  # fmt: skip
            print(" | ".join(rows[-1]), flush=True)
    table = ["| fast function | defect | first failing test | failure |",
             "|---|---|---|---|"]  # fmt: skip
    table += [f"| {a} | `{b}` | `{c}` | {d.replace('|', '/')} |" for a, b, c, d in rows]
    text = "\n".join(table) + "\n"
    print(text)
    missed = [row for row in rows if row[2] == "NOT CAUGHT"]
    print(f"{len(rows)} defects, {len(missed)} not caught")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
