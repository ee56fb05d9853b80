"""Print an ATEN_CPU_CAPABILITY other than this machine's default kernel path.

    ATEN_CPU_CAPABILITY=$(python tests/other_kernels.py) python ...

PyTorch picks its CPU kernels by what the processor offers: AVX-512, AVX2, or the
plain default (ARM's, or an old x86's). A model trained on one path differs in its last
bits from one trained on another, as it would on a reader's laptop; `make portability`
trains the book models on the path printed here: avx2 where the default is AVX-512,
default everywhere else.
"""

import torch

if __name__ == "__main__":
    here = torch.backends.cpu.get_cpu_capability()
    print("avx2" if here == "AVX512" else "default")
