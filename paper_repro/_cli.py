"""The command line every paper_repro script shares: --quick (default) or --full."""
import argparse


def parse_mode(doc: str, add_arguments=None) -> argparse.Namespace:
    """Parse ``--quick`` / ``--full`` (mutually exclusive; quick by default). The
    script's docstring's first line is the description; ``add_arguments(parser)`` may add
    the script's own options."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    if add_arguments is not None:
        add_arguments(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True, help="a few minutes on 2 cores (default)")
    mode.add_argument("--full", action="store_true", help="the seed's settings (hours on a CPU)")
    return parser.parse_args()
