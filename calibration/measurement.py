"""One timed quantity's raw samples, with its statistics and noise warning computed on demand.

Why keep the samples and not a summary: the fits need every sample (pooled regressions, empirical
compute distributions), while a table or a notebook wants a median and a word on noise. Like
`torch.utils.benchmark.Measurement`, the object holds the times and derives the rest, so no summary
can drift from the data it came from. Standard library only.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

# torch.utils.benchmark's thresholds and words (torch/utils/benchmark/utils/common.py _IQR_WARN_THRESHOLD,
# _IQR_GROSS_WARN_THRESHOLD): an IQR above 10 % of the median "could indicate system fluctuation", above
# 25 % it "suggests significant environmental influence".
NOISY_IQR_REL = 0.10
VERY_NOISY_IQR_REL = 0.25


@dataclass(frozen=True)
class Measurement:
    """Repeated timings (seconds) of one thing, e.g. rank 0's forward pass or one all-reduce size."""

    samples_s: tuple[float, ...]
    label: str = ""

    def __post_init__(self):
        if not self.samples_s:
            raise ValueError(f"a measurement needs at least one sample ({self.label or 'unlabelled'})")

    @property
    def n(self) -> int:
        return len(self.samples_s)

    @property
    def median_s(self) -> float:
        return float(statistics.median(self.samples_s))

    @property
    def mean_s(self) -> float:
        return statistics.fmean(self.samples_s)

    @property
    def sd_s(self) -> float:
        """Sample standard deviation (n - 1); 0 for a single sample."""
        return statistics.stdev(self.samples_s) if self.n > 1 else 0.0

    @property
    def min_s(self) -> float:
        return min(self.samples_s)

    @property
    def max_s(self) -> float:
        return max(self.samples_s)

    @property
    def iqr_s(self) -> float:
        """Interquartile range (linear interpolation, as numpy's default percentile); 0 below 2 samples."""
        if self.n < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples_s, n=4, method="inclusive")
        return q3 - q1

    @property
    def cv(self) -> float:
        """Coefficient of variation sd / mean (0 when the mean is 0)."""
        mean = self.mean_s
        return self.sd_s / mean if mean > 0 else 0.0

    def noise_warning(self) -> str | None:
        """One line when the spread is large against the median (torch.utils.benchmark's rule), else None."""
        median = self.median_s
        if self.n < 2 or median <= 0:
            return None
        rel = self.iqr_s / median
        if rel <= NOISY_IQR_REL:
            return None
        what = "significant environmental influence" if rel > VERY_NOISY_IQR_REL else "system fluctuation"
        name = f"{self.label}: " if self.label else ""
        return f"{name}interquartile range is {rel:.0%} of the median over {self.n} samples ({what})"
