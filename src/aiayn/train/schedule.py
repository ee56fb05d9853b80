"""The learning-rate schedule of §5.3, Eq. (3): warmup, then inverse square root."""


def learning_rate(
    step: int, d_model: int, warmup_steps: int, factor: float = 1.0
) -> float:
    """Eq. (3): factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5).

    Defined for step >= 1. It rises linearly for ``warmup_steps`` steps, peaks at
    step = warmup_steps, then decays as the inverse square root of the step.
    """
    step = max(step, 1)
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
