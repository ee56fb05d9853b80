"""Training: the loss, the learning-rate schedule, the loop, checkpoints, processes."""
