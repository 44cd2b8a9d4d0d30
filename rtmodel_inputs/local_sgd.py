"""The local-SGD configuration the options ask for (advise, plot speedup, validate; scenario-file keys too).

H is the inner steps between outer all-reduces and 0 is no local SGD, everywhere; a value not given is
LocalSgd's default. What differs is only what a command does when no local_sgd_* option is given at all
(`by_default`): advise shows its H = 30 row, plot speedup draws no local-SGD line and validate trains none.
"""

from __future__ import annotations

from runtime_model.prediction.local_sgd import DEFAULT_INNER_STEPS, LocalSgd

KEYS = ("local_sgd_h", "local_sgd_overlap", "local_sgd_fragments", "local_sgd_bits", "local_sgd_replica")
# option -> LocalSgd's field it sets
FIELDS = dict(zip(KEYS, ("inner_steps", "overlap_steps", "fragments", "bits", "replica"), strict=True))


def local_sgd_asked(opts: dict, by_default: bool) -> dict | None:
    """LocalSgd's keyword arguments for the configuration the options (KEYS in `opts`, None: not given)
    ask for, or None for no local SGD: --local-sgd-h 0 is none (another option beside it is refused); no
    option at all is the command's default (`by_default`: advise True, plot speedup and validate False);
    otherwise the given values, H=30 when H is not given, LocalSgd's defaults for the rest."""
    h = opts.get("local_sgd_h")
    given = {FIELDS[k]: opts[k] for k in KEYS[1:] if opts.get(k) is not None}
    if h == 0:
        if given:
            from runtime_model.core.errors import InvalidCombination

            first = next(k for k in KEYS[1:] if opts.get(k) is not None)
            raise InvalidCombination(
                "{local_sgd_h} turns local SGD off, so {" + first + "} has nothing to set",
                local_sgd_h=0,
                **{first: opts[first]},
            )
        return None
    if h is None and not given and not by_default:
        return None
    return {"inner_steps": DEFAULT_INNER_STEPS if h is None else h, **given}


def local_sgd_configs(opts: dict, by_default: bool) -> list[LocalSgd]:
    """The local-SGD rows (or lines) the options ask for: none, or one checked by LocalSgd itself (its
    errors name these options)."""
    asked = local_sgd_asked(opts, by_default)
    return [] if asked is None else [LocalSgd(**asked)]
