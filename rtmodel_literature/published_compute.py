"""The presets' one-GPU compute next to published one-GPU training throughputs (issue 49's checks).

A check, never a target: each row gives the preset model, GPU, precision and per-GPU batch the source ran;
the model's forward + backward + optimizer time there is compared with the published time per iteration
(batch / throughput). The sources' implementations are their own (NVIDIA's NHWC ResNet-50 with DALI,
fairseq's fused Transformer-big, nanoGPT with or without torch.compile), the presets model eager PyTorch:
the table says how far that carries. `python -m rtmodel_literature.published_compute` prints it.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib.resources import files

import pandas as pd

from runtime_model.presets import to_model as presets

DATA = "one_gpu_training.csv"


def rows() -> list[dict]:
    """The cited rows (rtmodel_literature/data/one_gpu_training.csv), comment lines skipped."""
    text = files("rtmodel_literature.data").joinpath(DATA).read_text()
    return list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))


def compute_checks() -> pd.DataFrame:
    """One row per published figure: published and predicted ms per iteration, signed relative error."""
    library = presets.load_library(())
    out = []
    for r in rows():
        batch = float(r["batch_per_gpu"])
        choice = presets.resolve(
            presets.PresetRequest(
                1, gpu=r["gpu"], model=r["model"], global_batch=batch, precision=r["precision"]
            ),
            library=library,
        )
        c = presets.scenario_from_choice(choice, library).compute
        published_ms = batch / float(r["per_s"]) * 1e3
        predicted_ms = (c.compute_s + c.optimizer_s) * 1e3
        out.append({
            "model": r["model"], "gpu": r["gpu"], "precision": r["precision"], "batch": batch,
            "source": source_owner(r),
            "compiled": r["compiled"] == "true", "published_ms": published_ms, "predicted_ms": predicted_ms,
            "error": predicted_ms / published_ms - 1.0,
        })  # fmt: skip
    return pd.DataFrame(out)


@dataclass(frozen=True)
class Disagreement:
    """Two sources' figures for one model, GPU and precision, per unit: how far apart the sources are.

    ratio: the slower per-unit time over the faster (>= 1). No single prediction is nearer both than
    least_mean (it sits on the faster one: (1 - 1/ratio) / 2) or least_max ((ratio - 1) / (ratio + 1),
    the point between them): a floor for any model's error on the pair, whatever it is. batch_explains:
    the slower figure ran the smaller batch (a small batch amortises less), so the batch alone could
    account for the gap; otherwise the implementations or harnesses differ."""

    model: str
    gpu: str
    precision: str
    slower: str
    faster: str
    ratio: float
    batch_explains: bool

    @property
    def least_mean(self) -> float:
        return (1.0 - 1.0 / self.ratio) / 2.0

    @property
    def least_max(self) -> float:
        return (self.ratio - 1.0) / (self.ratio + 1.0)


def source_owner(row: dict) -> str:
    """The publisher of a row: the repository owner in its `source` (NVIDIA, lambdal, karpathy)."""
    return row["source"].split("/", 1)[0]


def source_disagreement() -> list[Disagreement]:
    """Every (model, GPU, precision) that two publishers measured eagerly, compared per unit."""
    eager = [r for r in rows() if r["compiled"] != "true"]
    out = []
    for i, a in enumerate(eager):
        for b in eager[i + 1 :]:
            same = all(a[k] == b[k] for k in ("model", "gpu", "precision"))
            if not same or source_owner(a) == source_owner(b):
                continue
            slow, fast = sorted((a, b), key=lambda r: float(r["per_s"]))
            out.append(
                Disagreement(
                    a["model"], a["gpu"], a["precision"], source_owner(slow), source_owner(fast),
                    float(fast["per_s"]) / float(slow["per_s"]),
                    float(slow["batch_per_gpu"]) < float(fast["batch_per_gpu"]),
                )
            )  # fmt: skip
    return out


def main() -> None:
    df = compute_checks()
    print(df.to_string(index=False, float_format=lambda x: f"{x:,.3g}"))
    eager = df[~df["compiled"]]["error"].abs()
    print(f"eager rows: {len(eager)}, mean |error| {eager.mean():.1%}, max {eager.max():.1%}")
    print("two publishers, one model, GPU and precision (per unit; any prediction misses them by at least):")
    for d in source_disagreement():
        why = "the smaller batch could explain it" if d.batch_explains else "not the batch"
        print(
            f"  {d.model} {d.gpu} {d.precision}: {d.slower} {d.ratio:.2f}x slower than {d.faster} "
            f"({why}); least mean {d.least_mean:.1%}, least max {d.least_max:.1%}"
        )


if __name__ == "__main__":
    main()
