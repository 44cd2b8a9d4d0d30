"""The one typed set of inputs an answer is drawn from: `AdviceInputs`.

Why one frozen object: the verdict, the tuned-DDP re-answer, the crossovers, the settle line, every view
and every plot must see the same measured inputs; a tuple of dicts let each re-derive (and drop) what the
user measured. Built by `rtmodel_inputs.sources.resolve_inputs`, read by `rtmodel_inputs.answer`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from runtime_model.advice.confidence import Margin
from runtime_model.core.scenario import Scenario

# The measured sources a user can bring, by the name the provenance and the JSON give them.
PROFILE, CALIBRATION, NCCL_TESTS, TRACE, STEP = "profile", "calibration", "nccl-tests", "trace", "step-ms"
SOURCES = (PROFILE, CALIBRATION, NCCL_TESTS, TRACE, STEP)


@dataclass(frozen=True)
class AdviceInputs:
    """Everything advise predicts from, resolved once.

    scenario: the cluster and workload the rows are predicted on, with every measured source applied;
    tuned_ddp_scenario: the same with DDP's gradient_as_bucket_view (None where DDP's setting was measured
    or given): the same network, the same compute correction, only DDP's own copies differ;
    provenance: where each input came from (one line each, shown under the verdict and in the JSON);
    notes: lines about the inputs (shown with --verbose); document: the JSON's `inputs` (facts only);
    margin: what the advice states; sources: the measured sources that took part, in SOURCES' order;
    memory: the GPU, recipe and activations the rows' memory is judged from."""

    scenario: Scenario
    provenance: dict[str, str]
    margin: Margin
    notes: tuple[str, ...] = ()
    document: dict = field(default_factory=dict)
    tuned_ddp_scenario: Scenario | None = None
    sources: tuple[str, ...] = ()
    # what every row's memory is judged from (memory_fit.MemoryQuestion); None: not judged (a measured
    # source without --gpu or --gpu-memory-gib)
    memory: object = None

    @property
    def assumptions(self):
        """The preset answer's assumptions (None where measured inputs say what they measured)."""
        from runtime_model.advice.assumptions import Assumptions

        doc = self.document.get("assumptions")
        return None if doc is None else Assumptions.from_dict(doc)

    def measured(self, source: str) -> bool:
        """Did the user bring this measured source (one of SOURCES)?"""
        return source in self.sources
