"""The learning-rate schedule, as a function of training progress in epochs (pure Python).

    warm-up: a linear ramp from `base_lr` to `peak_lr` over `warmup_epochs`
    then:    constant  peak_lr
             cosine    peak_lr * (1 + cos(pi * t)) / 2, t going from 0 after warm-up to 1 at the last epoch
             step      peak_lr * decay_factor ** (decay epochs passed)

Progress is `epoch + step / steps_per_epoch`, the position of the next batch, which a checkpoint
restores exactly; a run resumed in the middle of the schedule continues on the same curve. (Horovod's
LearningRateWarmupCallback counts Keras' epochs and batches, which restart from zero after a resume.)
"""

import dataclasses
import math

SCHEDULES = ("constant", "cosine", "step")


@dataclasses.dataclass(frozen=True)
class Schedule:
    base_lr: float
    peak_lr: float
    warmup_epochs: float
    total_epochs: int
    kind: str = "constant"
    decay_epochs: tuple[float, ...] = ()
    decay_factor: float = 0.1

    def rate(self, progress: float) -> float:
        if self.warmup_epochs > 0 and progress < self.warmup_epochs:
            return self.base_lr + (self.peak_lr - self.base_lr) * progress / self.warmup_epochs
        if self.kind == "cosine":
            span = self.total_epochs - self.warmup_epochs
            done = min(1.0, max(0.0, (progress - self.warmup_epochs) / span)) if span > 0 else 1.0
            return self.peak_lr * 0.5 * (1.0 + math.cos(math.pi * done))
        if self.kind == "step":
            passed = sum(1 for epoch in self.decay_epochs if progress >= epoch)
            return self.peak_lr * self.decay_factor**passed
        return self.peak_lr


def parse_epochs(text: str) -> tuple[float, ...]:
    """'30,60,80' -> (30.0, 60.0, 80.0); increasing, non-negative. Raises ValueError otherwise."""
    if not text.strip():
        return ()
    values = tuple(float(part) for part in text.split(","))
    if any(value < 0 for value in values) or list(values) != sorted(set(values)):
        raise ValueError(text)
    return values
