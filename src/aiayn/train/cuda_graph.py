"""A training step's forward and backward pass replayed from a CUDA graph.

On a GPU the toy model's step is a few hundred small kernels, and Python launches them
one by one: the GPU spends most of the step waiting for the host. A CUDA graph records
the kernels of one forward and backward pass once; every later step replays them all
with one launch. A replay repeats exactly what was recorded, on the same memory: so
every batch is padded to the task's longest sequence and copied into the same input
tensors, and the gradients land in the same tensors every step. The optimizer step
(Adam's fused kernel) stays outside the graph.

Padding a batch further changes nothing but rounding: no query attends to a padding
key, and the loss weights padding targets by 0. ``tests/test_cuda_graph.py`` checks the
graphed steps against the eager ones.
"""

from collections.abc import Callable

import torch
from torch import Tensor, nn

from aiayn.tasks import Batch

WARMUP_PASSES = 3  # eager passes before recording: PyTorch's own set-up happens there


class GraphedForwardBackward:
    """Loss and gradients of one padded batch, replayed: every batch has the size of
    the first, its sequences padded to ``length``.

    ``batch_loss(model, batch) -> (loss, correct (B, T), real (B, T))`` is the pass
    to record (``aiayn.train.loss.batch_loss``); its loss is backpropagated into the
    model's ``.grad`` tensors, which the graph owns from then on: they must not be
    set to None (``zero_grad(set_to_none=True)``).
    """

    def __init__(
        self,
        model: nn.Module,
        batch_loss: Callable[[nn.Module, Batch], tuple[Tensor, Tensor, Tensor]],
        length: int,
    ):
        self.device = next(model.parameters()).device
        if self.device.type != "cuda":
            raise ValueError(
                f"a CUDA graph needs the model on a GPU, not {self.device}"
            )
        self.model, self.batch_loss, self.length = model, batch_loss, length
        # the graph's inputs, every batch is copied into them: made at the first call,
        # for batches of its size
        self.batch: Batch | None = None
        self.graph: torch.cuda.CUDAGraph | None = None  # recorded at the first call
        self.loss = self.accuracy = None  # the graph's outputs

    def __call__(self, batch: Batch) -> dict[str, Tensor]:
        """Copy ``batch`` (on the CPU) in and replay: the gradients are in ``.grad``.

        Returns copies of the batch's loss and accuracy, as ``forward_backward`` does.
        """
        if self.batch is None:
            ids = torch.empty(
                batch.src.size(0), self.length, dtype=torch.long, device=self.device
            )
            pad_ids = batch.src_pad_id, batch.tgt_pad_id
            self.batch = Batch(ids.clone(), ids.clone(), ids.clone(), *pad_ids)
        inputs = self.batch
        if batch.src.size(0) != inputs.src.size(0):
            raise ValueError(
                f"the graph was made for batches of {inputs.src.size(0)} sources, "
                f"not {batch.src.size(0)}"
            )
        padded = batch.padded_to(inputs.src.size(1), inputs.tgt_in.size(1))
        for into, ids in zip(
            (inputs.src, inputs.tgt_in, inputs.tgt_out),
            (padded.src, padded.tgt_in, padded.tgt_out),
            strict=True,
        ):
            into.copy_(ids.pin_memory(), non_blocking=True)
        if self.graph is None:
            self.record()
        self.graph.replay()
        return {
            "loss": self.loss.clone(),
            "train_token_accuracy": self.accuracy.clone(),
        }

    def record(self) -> None:
        """Run a few eager passes on a side stream, then record one pass."""
        self.model.train()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())  # the inputs' copies first
        with torch.cuda.stream(side):
            for _ in range(WARMUP_PASSES):
                self.model.zero_grad(set_to_none=True)
                # no name keeps this pass's autograd graph alive into the recording
                self.batch_loss(self.model, self.batch)[0].backward()
        torch.cuda.current_stream().wait_stream(side)
        self.model.zero_grad(set_to_none=True)  # the graph allocates the gradients
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            loss, correct, real = self.batch_loss(self.model, self.batch)
            self.loss, self.accuracy = loss.detach(), correct.sum() / real.sum()
            loss.backward()
