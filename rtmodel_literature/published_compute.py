"""The presets' one-GPU compute next to published one-GPU training throughputs (issue 49's checks).

A check, never a target: each row gives the preset model, GPU, precision and per-GPU batch the source ran;
the model's forward + backward + optimizer time there is compared with the published time per iteration
(batch / throughput). The sources' implementations are their own (NVIDIA's NHWC ResNet-50 with DALI,
fairseq's fused Transformer-big, nanoGPT with or without torch.compile), the presets model eager PyTorch:
the table says how far that carries. `python -m rtmodel_literature.published_compute` prints it.
"""

from __future__ import annotations

import csv
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
            "compiled": r["compiled"] == "true", "published_ms": published_ms, "predicted_ms": predicted_ms,
            "error": predicted_ms / published_ms - 1.0,
        })  # fmt: skip
    return pd.DataFrame(out)


def main() -> None:
    df = compute_checks()
    print(df.to_string(index=False, float_format=lambda x: f"{x:,.3g}"))
    eager = df[~df["compiled"]]["error"].abs()
    print(f"eager rows: {len(eager)}, mean |error| {eager.mean():.1%}, max {eager.max():.1%}")


if __name__ == "__main__":
    main()
