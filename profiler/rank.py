"""One rank's profile run: rendezvous, then shape, compute and communication sections.

Every rank executes the same sequence of collectives; rank 0 alone decides what a resume can skip
and broadcasts it, gathers everyone's samples, writes the checkpoints and prints progress. Any
exception becomes a RankFailure naming this rank and the phase it happened in.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

from profiler.errors import RankFailure
from profiler.failures import note_phase, one_line
from profiler.options import ProfileOptions
from rtmodel_documents.profile_document import (
    ProfileCommunication,
    ProfileCompute,
    ProfileDocument,
    ProfileWorkload,
    frozen,
    new_document,
)
from rtmodel_util.launch_env import check_launch_env


class PhaseTracker:
    def __init__(self, rank: int):
        self.rank, self.current = rank, "startup"

    @contextmanager
    def phase(self, name: str):
        self.current = name
        note_phase(self.rank, name)
        try:
            yield
        except RankFailure:
            raise
        except Exception as exc:
            raise RankFailure(self.rank, name, one_line(exc)) from exc


def run_rank(opts: ProfileOptions) -> dict | None:
    """Profile as one rank of an already launched job; returns the document (as written) on rank 0."""
    opts = opts.resolved()
    # before the rendezvous: a bad RANK / WORLD_SIZE would wait out the timeout
    rank = check_launch_env().rank
    from rtmodel_util.decent_dp_logs import quiet_decent_dp_setup

    quiet_decent_dp_setup()  # the wrapped iterations build Decent-DP
    tracker = PhaseTracker(rank)
    with tracker.phase("setup/init"):
        import torch.distributed as dist

        from rtmodel_harness.distributed import backend_note, init_distributed
        from rtmodel_util.rank_exit import release_process_groups

        backend, device = init_distributed(opts.backend, opts.timeout_s)
        why = backend_note(opts.backend)  # under torchrun: ranks sharing a GPU fall back to gloo
        if why and rank == 0 and opts.progress:
            print(f"[rtmodel profile] {why}", flush=True)
    try:
        return _sections(opts, rank, backend, device, tracker)
    finally:
        if dist.is_initialized():
            release_process_groups()


class _Run:
    """The sections of one rank's run; rank 0 (the lead) also owns the document (a ProfileDocument,
    replaced section by section) and the file it checkpoints to."""

    def __init__(self, opts: ProfileOptions, rank: int, backend: str, device, tracker: PhaseTracker):
        import torch.distributed as dist

        self.opts, self.rank, self.backend, self.device, self.tracker = opts, rank, backend, device, tracker
        self.dist = dist
        self.world = dist.get_world_size()
        self.lead = rank == 0
        self.doc: ProfileDocument = new_document()
        self.say = (
            (lambda msg: print(f"[rtmodel profile] {msg}", flush=True))
            if (self.lead and opts.progress)
            else None
        )

    def gather(self, obj) -> list:
        out: list = [None] * self.world
        self.dist.all_gather_object(out, obj)
        return out

    def checkpoint(self, section: str | None = None) -> None:
        from rtmodel_util.files import write_json_atomic

        if section:
            self.doc = self.doc.done(section)
        try:
            write_json_atomic(self.opts.out, self.doc.to_json())
        except OSError as exc:  # a full disk, a quota, a file system gone read-only: one line, not a trace
            raise RankFailure(
                self.rank,
                f"writing the profile after {section or 'its start'}",
                f"could not write {self.opts.out}: {exc.strerror or exc}",
            ) from exc

    def workload(self) -> None:
        """Build the model, lay out its buckets (the same on every rank) and pick message sizes."""
        from rtmodel_documents.profile_patterns import message_sizes
        from rtmodel_harness.buckets import ddp_first_bucket_mb
        from runtime_model.core.defaults import BUCKET_CAP_MIB

        o = self.opts
        with self.tracker.phase("setup/workload"):
            from rtmodel_harness.recipe import Recipe

            self.recipe = Recipe(o.precision, o.optimizer)
            self.recipe_note = self.recipe.device_note(self.device.type)  # fp16 without CUDA: refused here
            self.work = self._fresh_workload()
            cap = o.bucket_cap_mb if o.bucket_cap_mb is not None else BUCKET_CAP_MIB
            first = ddp_first_bucket_mb(o.bucket_cap_mb)
            self.layout = lay = self.work.bucket_layout(cap, first)
            layouts = self.gather((lay.ddp_buckets_bytes, lay.gossip_buckets_bytes))
            bad = [r for r, other in enumerate(layouts) if other != layouts[0]]
            if bad:
                raise RuntimeError(
                    f"rank {bad[0]} forms different gradient buckets than rank 0 (another model?)"
                )
            self.workload_doc = ProfileWorkload(
                model=o.model,
                model_args=self.work.model_args,
                batch_per_rank=o.batch_per_rank,
                precision=o.precision,
                optimizer=o.optimizer,
                param_bytes=self.work.param_bytes,
                bucket_cap_mb=cap,
                ddp_first_bucket_mb=first,
                ddp_buckets_bytes=tuple(lay.ddp_buckets_bytes),
                gossip_buckets_bytes=tuple(lay.gossip_buckets_bytes),
            )
            self.sizes = message_sizes(max(lay.ddp_buckets_bytes + lay.gossip_buckets_bytes), o.size_factor)

    def _fresh_workload(self):
        """The profiled model, built anew: self.work, and the DDP-wrapped iterations' own copy."""
        from rtmodel_harness.workloads import build_workload

        o = self.opts
        return build_workload(o.model, o.model_args, o.batch_per_rank, self.device, rank=self.rank)

    def shape(self) -> dict:
        """Shape section; rank 0 decides what a resume keeps and tells everyone."""
        from profiler.document import resume_plan
        from profiler.shape import collect_shape, ranks_per_node
        from rtmodel_documents.profile_patterns import patterns_for

        with self.tracker.phase("shape"):
            k = self.ranks_per_node = ranks_per_node(self.opts.ranks_per_node, self.world)
            shape, warnings = collect_shape(k, self.backend, self.device)
            self.patterns = patterns_for(self.world, k)
            plan = [None]
            if self.lead:
                lay = self.layout
                if self.say:
                    self.say(
                        f"shape: {self.world} ranks = {shape.nodes} node(s) x {k}, backend {self.backend}, "
                        f"device {self.device.type}; model {self.opts.model} "
                        f"({self.work.param_bytes / 2**20:.1f} MiB, {len(lay.ddp_buckets_bytes)} DDP / "
                        f"{len(lay.gossip_buckets_bytes)} gossip buckets)"
                    )
                    self.say(
                        f"recipe: {self.recipe.describe()}"
                        + (f" ({self.recipe_note})" if self.recipe_note else "")
                    )
                    for w in warnings:
                        self.say(f"warning: {w}")
                kept, message = None, None
                if self.opts.resume:
                    kept, message = resume_plan(self.opts.out, shape, self.workload_doc, self.sizes)
                    if self.say:
                        self.say(message)
                self.doc = replace(kept or new_document(), shape=shape, workload=self.workload_doc)
                self.checkpoint("shape")
                comm = self.doc.communication
                done = [p.pattern for p in comm.patterns] if comm else []
                done += ["in-flight"] if comm and comm.in_flight else []
                plan = [{"skip_compute": self.doc.compute is not None, "done": done}]
            self.dist.broadcast_object_list(plan, src=0)
            return plan[0]

    def compute(self, skip: bool) -> None:
        from profiler.compute import measure_compute
        from profiler.compute_memory import compute_fields, describe
        from profiler.wrapped import measure_ddp_work, measure_gossip_step
        from rtmodel_documents.profile_schema import DDP_WRAPPED_KEYS
        from rtmodel_harness.distributed import barrier

        if skip:
            if self.say:
                self.say("compute: kept from the earlier run")
        else:
            with self.tracker.phase("compute"):
                barrier(self.device)
                o = self.opts
                mine = measure_compute(self.work, self.layout, o.warmup, o.iterations, self.say, self.recipe)
                per_rank = self.gather(mine)  # every rank is alive before the wrapped iterations start
                cap = self.workload_doc.bucket_cap_mb
                ddp = self.gather(
                    measure_ddp_work(
                        self._fresh_workload, self.layout, self.recipe, cap, self.say, device=self.device
                    )
                )
                if o.trace_out is not None:
                    from profiler.trace_out import record_ddp_trace

                    record_ddp_trace(
                        self._fresh_workload,
                        self.recipe,
                        cap,
                        o.trace_out,
                        self.rank,
                        self.say,
                        quiet=not o.progress,
                    )
                wrapped = self.gather(
                    measure_gossip_step(
                        self.work, self.recipe, cap, self.ranks_per_node, o.timeout_s, self.say
                    )
                )
                if self.lead:
                    memory = compute_fields([r["peak_memory"] for r in ddp])
                    if self.say:
                        self.say(describe(memory))
                    measured = all("gossip_step_s" in w for w in wrapped)
                    if not measured and self.say:
                        self.say(
                            f"compute: Decent-DP's per-bucket work not measured: {wrapped[0].get('skipped')}"
                        )
                    self.doc = replace(
                        self.doc,
                        compute=ProfileCompute(
                            warmup=o.warmup,
                            iterations=o.iterations,
                            **{key: frozen([r[key] for r in per_rank]) for key in mine},
                            **{key: frozen([r[key] for r in ddp]) for key in DDP_WRAPPED_KEYS},
                            gossip_step_s=frozen([w["gossip_step_s"] for w in wrapped]) if measured else None,
                            **memory,
                        ),
                    )
        if self.lead:
            self.checkpoint("compute")
        del self.work  # free the model before large communication buffers

    def communication(self, done: list[str]) -> None:
        """Every pattern in turn; a pattern with the same groups as an earlier one is recorded once
        and referenced (`same_as`), e.g. node == all on a single node."""
        from profiler.comm import measure_pattern, pattern_entry

        if self.lead:
            comm = self.doc.communication
            self.doc = replace(
                self.doc,
                communication=ProfileCommunication(
                    sizes_bytes=tuple(self.sizes),
                    reps=self.opts.reps,
                    warmup_reps=1,
                    patterns=comm.patterns if comm else (),
                    in_flight=comm.in_flight if comm else None,
                ),
            )
        measured: dict[tuple, str] = {}
        for pattern in self.patterns:
            if pattern.name in done:
                if self.say:
                    self.say(f"communication {pattern.name}: kept from the earlier run")
                continue
            with self.tracker.phase(f"communication/{pattern.name}"):
                twin = measured.get(pattern.groups)
                if twin is None:
                    per_rank = self.gather(
                        measure_pattern(pattern, self.sizes, self.opts.reps, self.device, self.say)
                    )
                    measured[pattern.groups] = pattern.name
                if self.lead:
                    comm = self.doc.communication
                    if twin is None:
                        entry = pattern_entry(pattern, self.sizes, per_rank)
                        self._report(entry)
                    else:
                        entry = replace(
                            next(p for p in comm.patterns if p.pattern == twin),
                            pattern=pattern.name,
                            same_as=twin,
                        )
                    self.doc = replace(
                        self.doc, communication=replace(comm, patterns=(*comm.patterns, entry))
                    )
                    self.checkpoint()
        self._in_flight("in-flight" in done)
        if self.lead:
            order = {p.name: i for i, p in enumerate(self.patterns)}
            comm = self.doc.communication
            patterns = tuple(sorted(comm.patterns, key=lambda p: order.get(p.pattern, 99)))
            self.doc = replace(self.doc, communication=replace(comm, patterns=patterns))
            self.checkpoint("communication")

    def _in_flight(self, kept: bool) -> None:
        """The buckets as training issues them, one at a time and all in flight (comm.measure_in_flight):
        Decent-DP's on the first pattern of pairs, DDP's on every rank."""
        from profiler.comm import in_flight_entry, measure_in_flight

        if kept:
            if self.say:
                self.say("communication in flight: kept from the earlier run")
            return
        lay = self.workload_doc
        pairs = next((p for p in self.patterns if p.group_size == 2), None)
        plan = [(pairs, lay.gossip_buckets_bytes)] if pairs else []
        plan += [(p, lay.ddp_buckets_bytes) for p in self.patterns if p.name == "all"]
        entries = []
        for pattern, buckets in plan:
            with self.tracker.phase(f"communication/in-flight/{pattern.name}"):
                gossip = pattern.name != "all"  # Decent-DP's rounds use groups of their own
                timed = measure_in_flight(
                    pattern, list(buckets), self.opts.reps, self.device, two_groups=gossip
                )
                per_rank = self.gather(timed)
                if self.lead:
                    entry = in_flight_entry(pattern, list(buckets), per_rank)
                    entries.append(entry)
                    if self.say:
                        two = (
                            ""
                            if entry.group_gain is None
                            else f", {entry.group_gain:.2f}x that over two groups"
                        )
                        self.say(
                            f"communication in flight: {entry.whose} {len(buckets)} bucket(s) on {pattern.name} "
                            f"moved {entry.gain:.2f}x the one-at-a-time rate{two}"
                        )
        if self.lead and entries:
            self.doc = replace(
                self.doc, communication=replace(self.doc.communication, in_flight=tuple(entries))
            )
            self.checkpoint()

    def _report(self, entry) -> None:
        if self.say:
            r0, r1 = entry.results[0], entry.results[-1]
            self.say(
                f"communication {entry.pattern}: {r0.median_s * 1e6:.0f} us at {r0.bytes} B, "
                f"{r1.median_s * 1e3:.2f} ms at {r1.bytes} B "
                f"(busbw {r1.busbw_Bps / 1e9:.2f} GB/s)"
            )

    def finish(self) -> dict | None:
        if not self.lead:
            return None
        self.doc = replace(self.doc, complete=True)
        self.checkpoint()
        if self.say:
            self.say(f"done: wrote {self.opts.out}")
        return self.doc.to_json()


def _sections(opts: ProfileOptions, rank: int, backend: str, device, tracker: PhaseTracker) -> dict | None:
    run = _Run(opts, rank, backend, device, tracker)
    run.workload()
    plan = run.shape()
    run.compute(plan["skip_compute"])
    run.communication(plan["done"])
    return run.finish()
