"""The end of a rank a test spawned: the same teardown validation's ranks use."""


def end_spawned_rank() -> None:
    """Destroy the process groups while the interpreter is alive, then exit 0 without finalisation.

    A plain destroy_process_group at the end of a spawned gloo rank lets gloo's worker threads be
    torn down during interpreter finalisation, and the rank, its work done, dies with SIGABRT
    ("terminate called without an active exception", pytorch/pytorch#179291): seen once in CI.
    """
    from rtmodel_util.rank_exit import exit_without_finalisation, release_process_groups

    release_process_groups()
    exit_without_finalisation(0)
