"""The command line every paper_repro script shares: --quick (default) or --full, and
--replot for the scripts that can redraw their figure from the committed JSON; and
``machine()``, the description of the machine and jaxz source each script's JSON records."""
import argparse
import json

from jaxz.provenance import describe


def parse_mode(doc: str, add_arguments=None, replot: bool = False) -> argparse.Namespace:
    """Parse ``--quick`` / ``--full`` (mutually exclusive; quick by default). The
    script's docstring's first line is the description; ``add_arguments(parser)`` may add
    the script's own options; ``replot=True`` adds ``--replot`` (redraw the figure from
    the JSON in paper_repro/out without computing anything)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    if add_arguments is not None:
        add_arguments(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True, help="a few minutes on 2 cores (default)")
    mode.add_argument("--full", action="store_true", help="the seed's settings (hours on a CPU)")
    if replot:
        parser.add_argument("--replot", action="store_true",
                            help="redraw the figure from the committed JSON in paper_repro/out (no computation; "
                                 "with --full, the full run's where the script keeps it apart)")
    return parser.parse_args()


def load_report(path: str) -> dict:
    """The JSON a script wrote (for ``--replot``)."""
    with open(path) as handle:
        return json.load(handle)


def machine(**extra) -> dict:
    """Where a result came from: ``jaxz._provenance.describe(**extra)`` (platform, cores,
    JAX version and backend, devices, load average, the jaxz source)."""
    return describe(**extra)
