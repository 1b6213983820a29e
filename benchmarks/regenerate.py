"""Regenerate the committed results: every file in benchmarks/results/ and paper_repro/out/,
each by the script and arguments that made it, one after the other, with a progress line.

    python benchmarks/regenerate.py [--quick | --full] [--only NAME ...] [--stale] [--dry-run] [--table]

``--quick`` (default) reruns the outputs whose committed files came from quick runs, the way
they were made (a script's ``--quick``, or the arguments the committed JSON records).
``--full`` also reruns the outputs committed from longer runs (a script's ``--full``, runs
merged over several sessions), with the commands that made them: hours. Where a quick run
would replace a committed --full or composite file with a smaller one, ``--quick`` keeps the
committed file and says so. ``--only`` picks outputs by name; ``--stale`` only those that
``stale_outputs.py`` finds stale; ``--dry-run`` prints what would run; ``--table`` prints the
table below (also in docs/reproductions.md).

Needs: outputs whose committed file holds a peer's results (dynesty, jaxns, particles, ...)
are skipped, their committed files kept, where that peer is not installed (a run without it
would drop the peer's rows). Outputs made on a GPU (``*_gpu.json``, ``arm_gpc_full.*``) run
only where JAX's backend is not the CPU; scripts that write one name on every backend have
their file renamed to the ``_gpu`` name and the CPU file they overwrite put back. Every run
time is recorded in benchmarks/results/regenerate_times.json.

Run under ``nice`` on a shared machine. The estimates below are minutes on 2 CPU cores for
the --quick commands ("--" where --quick keeps the file); basis: "run" timed by this script
(regenerate_times.json: 2 shared cores, load 1-4), "doc" the script's docstring, "json" the
seconds the committed JSON records, "guess" none of these (a first run will tell).

| output | committed from | --quick | needs | min | basis |
|---|---|---|---|---|---|
| mbar_overlap_threshold | its only mode | rerun | - | 0.2 | run |
| mbar_vs_pymbar | its only mode | rerun | pymbar | 0.2 | run |
| ising_exact_timing | --models 0 --float32 | rerun | - | 4.5 | run |
| arm_readings | --runs 400 | rerun | - | 20 | guess |
| rbm_gibbs_roofline | --quick | rerun | - | 15 | guess |
| rts_vs_ais | --quick | rerun | - | 5 | doc |
| scaling | --max-particles 100000 | rerun | - | 10 | guess |
| twisted_ising_benchmark | --quick, then (a) with 300 runs | rerun | - | 40 | doc |
| sgais_logistic_reference | --draws 100000 | rerun | - | 1.7 | run |
| sgais_mixture_reference | --draws 100000 | rerun | - | 1.9 | run |
| sgais_defaults | 4 streams x 8 runs | rerun | - | 15 | guess |
| evidence_suite | jaxz rows merged; peers' rows | rerun jaxz rows | - | 84 | run |
| evidence_suite_hard | partial: merged runs | rerun | nautilus | 90 | guess |
| calibration | --quick + 130 merged reruns | kept | - | -- | -- |
| rbm784 | --full | kept | - | -- | -- |
| evidence_coverage | --quick | rerun | - | 12 | run |
| waste_free_tails | its only mode | rerun | - | 7 | guess |
| numpyro_evidence | with jaxns | rerun | jaxns | 10 | guess |
| compile_options | --quick | rerun | - | 8 | guess |
| time_to_answer | --quick --timeout 120 (+ peer rows merged) | rerun | jaxns, dynesty, nautilus | 45 | doc |
| sgais_vs_ns | --quick, with dynesty | rerun | dynesty | 5 | doc |
| smc_vs_peers | with particles | rerun | particles, numba | 10 | guess |
| smc_tuned_vs_peers | --runs 30, with particles | rerun | particles, numba | 25 | guess |
| arm_gpc | --quick --runs 80 --max-particles 10000 | rerun | - | 50 | doc |
| arm_rbm | --quick | rerun | - | 10 | doc |
| rts_init | --quick | rerun | - | 0.2 | run |
| rts_gmm | --quick | rerun | - | 3 | doc |
| rts_rbm | --quick | rerun | - | 6 | doc |
| rts_temps | --quick | rerun | - | 4 | doc |
| rts_tracking | --quick | rerun | - | 4 | doc |
| sgais_accuracy | --quick | rerun | - | 15 | guess |
| sgais_reference | --quick | rerun | - | 30 | doc |
| sgais_sensitivity | --quick | rerun | - | 10 | guess |
| sgais_shift | --quick | rerun | - | 5 | guess |
| twisted_gmrf | --quick (+ --ordering-check runs) | rerun | - | 10 | doc |
| twisted_ising_exact | transfer matrices, once | kept | - | -- | -- |
| twisted_ising | --quick | rerun | - | 6 | doc |
| twisted_lda | --quick | rerun | - | 5 | json |
| arm_gpc_full | GPU sessions (--full, merged) | GPU only | - | -- | -- |
| arm_gpc_scale_gpu | GPU | GPU only | - | -- | -- |
| ising_exact_timing_gpu | GPU | GPU only | - | -- | -- |
| mbar_vs_pymbar_gpu | GPU | GPU only | pymbar | -- | -- |
| rbm784_quick_gpu | GPU, --quick | GPU only | - | -- | -- |
| rts_vs_ais_gpu | GPU, --quick | GPU only | - | -- | -- |
| scaling_gpu | GPU | GPU only | - | -- | -- |
| smc_vs_peers_gpu | GPU, --no-particles | GPU only | - | -- | -- |
| smc_tuned_vs_peers_gpu | GPU, --no-particles | GPU only | - | -- | -- |
| evidence_levers | hand-written | kept | - | -- | -- |
| sgais_reference_diagnostics | hand-written | kept | - | -- | -- |

--quick in all: 568 minutes on 2 CPU cores; 383 (about 6.4 h)
without the outputs that need dynesty, jaxns, nautilus, numba, particles (not installed here).
"""
import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMES = ROOT / "benchmarks" / "results" / "regenerate_times.json"
RESULTS, OUT = "benchmarks/results", "paper_repro/out"
PARTICLES = ("particles", "numba")
NOT_IN_TEST_EXTRA = {"jaxns", "dynesty", "nautilus", "particles", "numba"}  # peers pyproject's test extra leaves out


@dataclass(frozen=True)
class Output:
    """Committed files and how to make them again.

    ``quick`` / ``full``: the commands of each mode (a script and its arguments each), None
    where that mode keeps the committed files (``why`` says why); ``full`` defaults to
    ``quick``. ``minutes`` estimates the quick commands on 2 CPU cores (``basis``: "run",
    "doc", "json" or "guess"). ``needs``: Python modules the commands import (peers);
    ``gpu``: run only where JAX's backend is not the CPU. ``renamed``: files the script
    writes under another name (script's name -> committed name); ``restored``: committed
    files of another output that the commands overwrite, put back afterwards; ``fresh``:
    committed files removed before ``--full`` runs (the script recomputes what it finds
    missing), put back if a command fails."""
    name: str
    files: tuple
    committed: str
    quick: tuple | None
    full: tuple | None = ()
    minutes: float | None = None
    basis: str = "--"
    needs: tuple = ()
    gpu: bool = False
    renamed: dict = field(default_factory=dict)
    restored: tuple = ()
    fresh: tuple = ()
    why: str = ""

    def commands(self, full: bool):
        if full:
            return self.quick if self.full == () else self.full
        return self.quick

    def quick_action(self) -> str:
        if self.gpu:
            return "GPU only"
        if self.quick is None:
            return "kept"
        return "rerun jaxz rows" if self.name == "evidence_suite" else "rerun"


def _script(path: str, *args: str) -> tuple:
    return (path, *args)


EVIDENCE_PROBLEMS_128 = ("shells d=2", "two-mode d=2", "eggbox", "rosenbrock")
EVIDENCE_PROBLEMS_32 = ("shells d=5", "shells d=10", "two-mode d=10", "correlated d=20", "funnel d=10")
EVIDENCE_PROBLEMS_16 = ("shells d=20", "two-mode d=20", "logistic")
EVIDENCE_ALL = EVIDENCE_PROBLEMS_128 + EVIDENCE_PROBLEMS_32 + EVIDENCE_PROBLEMS_16 + ("shells d=30",)


def _evidence_rows(reference: bool) -> tuple:
    """The jaxz rows of the evidence suite at the committed run counts (the JSON's last five
    ``settings.merged`` entries), merged into the committed file; the peers' rows stay."""
    suite = "benchmarks/evidence_suite.py"
    merge = ("--merge", "--methods")
    return (_script(suite, *merge, "jaxz", "--jaxz-runs", "128", "--only", *EVIDENCE_PROBLEMS_128),
            _script(suite, *merge, "jaxz", "--jaxz-runs", "32", "--only", *EVIDENCE_PROBLEMS_32),
            _script(suite, *merge, "jaxz", "--jaxz-runs", "16", *(("--reference",) if reference else ()),
                    "--only", *EVIDENCE_PROBLEMS_16),
            _script(suite, *merge, "jaxz", "--jaxz-runs", "8", "--only", "shells d=30"),
            _script(suite, *merge, "jaxz_waste_free", "--jaxz-runs", "16", "--only", *EVIDENCE_ALL))


ARM_GPC_FULL = "paper_repro/arm_gpc.py", "--full"
OUTPUTS = (
    # benchmarks/results, cheapest first; references before what reads them
    Output("mbar_overlap_threshold", (f"{RESULTS}/mbar_overlap_threshold.json",), "its only mode",
           (_script("benchmarks/mbar_overlap_threshold.py"),), minutes=0.2, basis="run"),
    Output("mbar_vs_pymbar", (f"{RESULTS}/mbar_vs_pymbar.json",), "its only mode",
           (_script("benchmarks/mbar_vs_pymbar.py"),), minutes=0.2, basis="run", needs=("pymbar",)),
    Output("ising_exact_timing", (f"{RESULTS}/ising_exact_timing.json",), "--models 0 --float32",
           (_script("benchmarks/ising_exact_timing.py", "--models", "0", "--float32"),), minutes=4.5, basis="run"),
    Output("arm_readings", (f"{RESULTS}/arm_readings.json",), "--runs 400",
           (_script("benchmarks/arm_readings.py", "--runs", "400"),), minutes=20, basis="guess",
           why="estimate: a 4-run trial took 12 minutes at load 6, mostly compilation"),
    Output("rbm_gibbs_roofline", (f"{RESULTS}/rbm_gibbs_roofline.json",), "--quick",
           (_script("benchmarks/rbm_gibbs_roofline.py", "--quick"),), minutes=15, basis="guess"),
    Output("rts_vs_ais", (f"{RESULTS}/rts_vs_ais.json",), "--quick",
           (_script("benchmarks/rts_vs_ais.py", "--quick"),), minutes=5, basis="doc"),
    Output("scaling", (f"{RESULTS}/scaling.json",), "--max-particles 100000",
           (_script("benchmarks/scaling.py", "--max-particles", "100000"),), minutes=10, basis="guess",
           why="committed as --max-particles 100000, parts (c) and (d) rerun with --only-devices; one run does all"),
    Output("twisted_ising_benchmark", (f"{RESULTS}/twisted_ising.json",), "--quick, then (a) with 300 runs",
           (_script("benchmarks/twisted_ising.py", "--quick"),
            _script("benchmarks/twisted_ising.py", "--runs", "300", "--resampling", "systematic",
                    "--only-efficiency")), minutes=40, basis="doc",
           why="README and docs/reproductions.md quote (a) from 300 runs per setting (systematic); the committed "
               "JSON holds a later 30-run --quick (a), so the second command restores what they quote"),
    Output("sgais_logistic_reference", (f"{RESULTS}/sgais_logistic_reference.json",), "--draws 100000",
           (_script("benchmarks/sgais_logistic_reference.py", "--draws", "100000", "--dof", "10.0"),),
           minutes=1.7, basis="run"),
    Output("sgais_mixture_reference", (f"{RESULTS}/sgais_mixture_reference.json",), "--draws 100000",
           (_script("benchmarks/sgais_mixture_reference.py", "--draws", "100000", "--dof", "10.0"),),
           minutes=1.9, basis="run"),
    Output("sgais_defaults", (f"{RESULTS}/sgais_defaults.json", f"{RESULTS}/sgais_defaults.md"), "4 streams x 8 runs",
           (_script("benchmarks/sgais_defaults.py"),), minutes=15, basis="guess"),
    Output("evidence_suite", (f"{RESULTS}/evidence_suite.json", f"{RESULTS}/evidence_suite.md",
                              f"{RESULTS}/evidence_suite.png", f"{RESULTS}/evidence_suite_reference.json"),
           "jaxz rows merged; peers' rows", _evidence_rows(reference=False), _evidence_rows(reference=True),
           minutes=84, basis="run",
           why="a composite: jaxz rows at 8-128 runs from several --merge runs, the peers' rows (dynesty, jaxns, "
               "nss, UltraNest; mostly not installed here) from earlier ones; both modes rerun the jaxz rows at "
               "the committed run counts and keep the peers'; --full also recomputes the logistic reference. "
               "The jaxz_waste_free rows are rerun at 16 runs, where the committed file holds up to 112 merged "
               "ones; the file stays stale while the peers' rows are (their runs predate code hashes)"),
    Output("evidence_suite_hard", (f"{RESULTS}/evidence_suite_hard.json", f"{RESULTS}/evidence_suite_hard.md",
                                   f"{RESULTS}/evidence_suite_hard.png"), "partial: merged runs",
           (_script("benchmarks/evidence_suite.py", "--only", "hard", "--results", "evidence_suite_hard",
                    "--jaxz-runs", "4", "--peer-runs", "2", "--nautilus-seconds", "150"),),
           minutes=90, basis="guess", needs=("nautilus",),
           why="committed from five runs merged (jaxz default on two rows, jaxz SMC alone on 13, one capped nautilus "
               "run per row, dynesty and nss on two rows; the JSON's settings.invocations); one command makes "
               "every row"),
    Output("calibration", (f"{RESULTS}/calibration.json", f"{RESULTS}/calibration.md"),
           "--quick + 130 merged reruns", None,
           (_script("benchmarks/calibration.py", "--full"),
            _script("benchmarks/calibration.py", "--borderline", "--seed", "0", "1")),
           why="the committed table has all 142 rows (--quick writes 64), 400-2000 runs a row, borderline rows "
               "pooled over 2-8 seeds (meta.merged lists 130 reruns); --full: every row at 1000 runs, then the "
               "borderline rows over seeds 0 and 1, about 8 hours from the committed rows' times"),
    Output("rbm784", (f"{RESULTS}/rbm784.json", f"{RESULTS}/rbm784.md"), "--full", None,
           (_script("benchmarks/rbm784.py", "--full"),),
           why="committed from --full (tuned, 16 runs per method; the docstring's reading); a --quick run would "
               "write 8 untuned runs over it; --full about 45 minutes"),
    Output("evidence_coverage", (f"{RESULTS}/evidence_coverage.json", f"{RESULTS}/evidence_coverage.md"), "--quick",
           (_script("benchmarks/evidence_coverage.py", "--quick"),),
           (_script("benchmarks/evidence_coverage.py", "--full"),), minutes=12, basis="run"),
    Output("waste_free_tails", (f"{RESULTS}/waste_free_tails.json", f"{RESULTS}/waste_free_tails.md"),
           "its only mode", (_script("benchmarks/waste_free_tails.py"),), minutes=7, basis="guess"),
    Output("numpyro_evidence", (f"{RESULTS}/numpyro_evidence.json", f"{RESULTS}/numpyro_evidence.md"),
           "with jaxns", (_script("benchmarks/numpyro_evidence.py"),), minutes=10, basis="guess", needs=("jaxns",),
           why="without jaxns its column would read 'not available'"),
    Output("compile_options", (f"{RESULTS}/compile_options.json", f"{RESULTS}/compile_options.md"), "--quick",
           (_script("benchmarks/compile_options.py", "--quick"),),
           (_script("benchmarks/compile_options.py", "--full"),),
           minutes=8, basis="guess"),
    Output("time_to_answer", (f"{RESULTS}/time_to_answer.json", f"{RESULTS}/time_to_answer.md"),
           "--quick --timeout 120 (+ peer rows merged)",
           (_script("benchmarks/time_to_answer.py", "--quick", "--timeout", "120"),),
           (_script("benchmarks/time_to_answer.py", "--full"),), minutes=45, basis="doc",
           needs=("jaxns", "dynesty", "nautilus"),
           why="committed from --quick --timeout 120 with the nautilus rows of beta_bernoulli and normal_mean and "
               "the dynesty/nautilus rows of dirichlet_multinomial rerun (--only ... --methods, merged) after "
               "fixes to their NumPy functions; one --quick run makes the same rows; --full adds the logistic "
               "regression and a second repetition (timeout 300 s per call)"),
    Output("sgais_vs_ns", (f"{RESULTS}/sgais_vs_ns.json",), "--quick, with dynesty",
           (_script("benchmarks/sgais_vs_ns.py", "--quick"),), minutes=5, basis="doc", needs=("dynesty",)),
    Output("smc_vs_peers", (f"{RESULTS}/smc_vs_peers.json",), "with particles",
           (_script("benchmarks/smc_vs_peers.py"),), minutes=10, basis="guess", needs=PARTICLES),
    Output("smc_tuned_vs_peers", (f"{RESULTS}/smc_tuned_vs_peers.json",), "--runs 30, with particles",
           (_script("benchmarks/smc_tuned_vs_peers.py", "--runs", "30"),), minutes=25, basis="guess",
           needs=PARTICLES),
    # paper_repro/out
    Output("arm_gpc", (f"{OUT}/arm_gpc.json", f"{OUT}/arm_gpc.png"), "--quick --runs 80 --max-particles 10000",
           (_script("paper_repro/arm_gpc.py", "--quick", "--runs", "80", "--max-particles", "10000", "--only", "arm"),
            _script("paper_repro/arm_gpc.py", "--quick", "--runs", "80", "--only", "ais")),
           (_script("paper_repro/arm_gpc.py", "--quick", "--runs", "80", "--max-particles", "10000", "--only", "arm"),
            _script("paper_repro/arm_gpc.py", "--quick", "--runs", "80", "--only", "ais"),
            _script("paper_repro/gpc_reference.py", "--quick")), minutes=50, basis="doc",
           why="the JSON's command; its Genz reference (gpc_reference.py --quick: 40 minutes under a load of ~15, "
               "8.5 on 2 quiet cores) is kept across reruns and recomputed by --full"),
    Output("arm_rbm", (f"{OUT}/arm_rbm.json", f"{OUT}/arm_rbm.png"), "--quick",
           (_script("paper_repro/arm_rbm.py", "--quick"),), minutes=10, basis="doc"),
    Output("rts_init", (f"{OUT}/rts_init.json", f"{OUT}/rts_init.png"), "--quick",
           (_script("paper_repro/rts_init.py", "--quick"),), minutes=0.2, basis="run"),
    Output("rts_gmm", (f"{OUT}/rts_gmm.json", f"{OUT}/rts_gmm.png"), "--quick",
           (_script("paper_repro/rts_gmm.py", "--quick"),), minutes=3, basis="doc"),
    Output("rts_rbm", (f"{OUT}/rts_rbm.json", f"{OUT}/rts_rbm.png"), "--quick",
           (_script("paper_repro/rts_rbm.py", "--quick"),), minutes=6, basis="doc"),
    Output("rts_temps", (f"{OUT}/rts_temps.json", f"{OUT}/rts_temps.png"), "--quick",
           (_script("paper_repro/rts_temps.py", "--quick"),), minutes=4, basis="doc"),
    Output("rts_tracking", (f"{OUT}/rts_tracking.json", f"{OUT}/rts_tracking.png"), "--quick",
           (_script("paper_repro/rts_tracking.py", "--quick"),), minutes=4, basis="doc"),
    Output("sgais_accuracy", (f"{OUT}/sgais_accuracy.json", f"{OUT}/sgais_accuracy.png"), "--quick",
           (_script("paper_repro/sgais_accuracy.py", "--quick"),), minutes=15, basis="guess"),
    Output("sgais_reference", (f"{OUT}/sgais_reference.json",), "--quick",
           (_script("paper_repro/sgais_reference.py", "--quick"),), minutes=30, basis="doc",
           why="reads sgais_accuracy.json (runs after it); sgais_accuracy reads this file's reference"),
    Output("sgais_sensitivity", (f"{OUT}/sgais_sensitivity.json", f"{OUT}/sgais_sensitivity.png"), "--quick",
           (_script("paper_repro/sgais_sensitivity.py", "--quick"),), minutes=10, basis="guess"),
    Output("sgais_shift", (f"{OUT}/sgais_shift.json", f"{OUT}/sgais_shift.png"), "--quick",
           (_script("paper_repro/sgais_shift.py", "--quick"),), minutes=5, basis="guess"),
    Output("twisted_gmrf", (f"{OUT}/twisted_gmrf.json", f"{OUT}/twisted_gmrf.png"), "--quick (+ --ordering-check runs)",
           (_script("paper_repro/twisted_gmrf.py", "--quick"),),
           (_script("paper_repro/twisted_gmrf.py", "--quick"),
            _script("paper_repro/twisted_gmrf.py", "--ordering-check"),
            _script("paper_repro/twisted_gmrf.py", "--ordering-check", "--particles", "1024", "--methods", "SMC-Base")),
           minutes=10, basis="doc",
           why="--quick keeps the committed ordering-check entries (200 runs per box); --full reruns them"),
    Output("twisted_ising_exact", (f"{OUT}/twisted_ising_exact.json",), "transfer matrices, once", None,
           (_script("paper_repro/twisted_ising.py", "--quick"),), fresh=(f"{OUT}/twisted_ising_exact.json",),
           why="exact log Z of the three 16x16 models, reused while the models' fingerprint matches; --full "
               "recomputes it (about 40 minutes on 2 cores, seconds on a GPU) and redraws twisted_ising"),
    Output("twisted_ising", (f"{OUT}/twisted_ising.json", f"{OUT}/twisted_ising.png"), "--quick",
           (_script("paper_repro/twisted_ising.py", "--quick"),), minutes=6, basis="doc"),
    Output("twisted_lda", (f"{OUT}/twisted_lda.json", f"{OUT}/twisted_lda.png"), "--quick",
           (_script("paper_repro/twisted_lda.py", "--quick"),), minutes=5, basis="json"),
    # made on a GPU
    Output("arm_gpc_full", (f"{OUT}/arm_gpc_full.json", f"{OUT}/arm_gpc_full.png"), "GPU sessions (--full, merged)",
           None, (_script(*ARM_GPC_FULL, "--only", "arm", "--runs", "8", "--max-particles", "10000"),
                  _script(*ARM_GPC_FULL, "--only", "ais", "--runs", "4", "--methods", "AIS HMC from q*",
                          "AIS RMHMC from q*"),
                  _script(*ARM_GPC_FULL, "--only", "ais", "--runs", "80", "--methods", "AIS HMC from q*",
                          "--max-seconds", "150"),
                  _script(*ARM_GPC_FULL, "--only", "ais", "--runs", "16", "--methods", "AIS RMHMC from p",
                          "--max-rmhmc-steps", "500", "--max-seconds", "10"),
                  _script(*ARM_GPC_FULL, "--only", "arm", "--runs", "1", "--max-particles", "100000",
                          "--max-buffer-gb", "24", "--resume", "--methods", "ARM", "RM", "--max-seconds", "95"),
                  _script(*ARM_GPC_FULL, "--only", "arm", "--runs", "1", "--max-particles", "100000",
                          "--max-buffer-gb", "24", "--resume", "--methods", "RM"),
                  _script(*ARM_GPC_FULL, "--only", "ais", "--runs", "80", "--methods", "AIS HMC from q*", "--resume"),
                  _script(*ARM_GPC_FULL, "--only", "arm", "--runs", "80", "--top-up", "--max-particles", "1000",
                          "--chunk", "24", "--max-seconds", "380"),
                  _script(*ARM_GPC_FULL, "--only", "arm", "--runs", "32", "--top-up", "--max-particles", "10000",
                          "--chunk", "8", "--max-seconds", "240"),
                  _script("paper_repro/gpc_reference.py", "--figure", "full", "--genz-runs", "16", "--genz-points",
                          "16384", "--arm-runs", "0", "--ais-runs", "0")), gpu=True,
           why="the JSON's command list, run over several GPU sessions (one H100), AIS-RMHMC from q on 2 CPU "
               "cores; more than one 15-minute GPU lease"),
    Output("arm_gpc_scale_gpu", (f"{RESULTS}/arm_gpc_scale_gpu.json",), "GPU",
           (_script("benchmarks/arm_gpc_scale.py"),), gpu=True),
    Output("ising_exact_timing_gpu", (f"{RESULTS}/ising_exact_timing_gpu.json",), "GPU",
           (_script("benchmarks/ising_exact_timing.py", "--batch-sizes", "1024", "4096", "--float32"),), gpu=True),
    Output("mbar_vs_pymbar_gpu", (f"{RESULTS}/mbar_vs_pymbar_gpu.json",), "GPU",
           (_script("benchmarks/mbar_vs_pymbar.py"),), gpu=True, needs=("pymbar",),
           renamed={f"{RESULTS}/mbar_vs_pymbar.json": f"{RESULTS}/mbar_vs_pymbar_gpu.json"},
           restored=(f"{RESULTS}/mbar_vs_pymbar.json",)),
    Output("rbm784_quick_gpu", (f"{RESULTS}/rbm784_quick_gpu.json",), "GPU, --quick",
           (_script("benchmarks/rbm784.py", "--quick"),), gpu=True,
           renamed={f"{RESULTS}/rbm784.json": f"{RESULTS}/rbm784_quick_gpu.json"},
           restored=(f"{RESULTS}/rbm784.json", f"{RESULTS}/rbm784.md")),
    Output("rts_vs_ais_gpu", (f"{RESULTS}/rts_vs_ais_gpu.json",), "GPU, --quick",
           (_script("benchmarks/rts_vs_ais.py", "--quick"),), gpu=True,
           renamed={f"{RESULTS}/rts_vs_ais.json": f"{RESULTS}/rts_vs_ais_gpu.json"},
           restored=(f"{RESULTS}/rts_vs_ais.json",)),
    Output("scaling_gpu", (f"{RESULTS}/scaling_gpu.json",), "GPU",
           (_script("benchmarks/scaling.py", "--label", "gpu"),), gpu=True),
    Output("smc_vs_peers_gpu", (f"{RESULTS}/smc_vs_peers_gpu.json",), "GPU, --no-particles",
           (_script("benchmarks/smc_vs_peers.py", "--no-particles"),), gpu=True,
           renamed={f"{RESULTS}/smc_vs_peers.json": f"{RESULTS}/smc_vs_peers_gpu.json"},
           restored=(f"{RESULTS}/smc_vs_peers.json",)),
    Output("smc_tuned_vs_peers_gpu", (f"{RESULTS}/smc_tuned_vs_peers_gpu.json",), "GPU, --no-particles",
           (_script("benchmarks/smc_tuned_vs_peers.py", "--no-particles"),), gpu=True,
           renamed={f"{RESULTS}/smc_tuned_vs_peers.json": f"{RESULTS}/smc_tuned_vs_peers_gpu.json"},
           restored=(f"{RESULTS}/smc_tuned_vs_peers.json",)),
    # written by hand from one-off runs: nothing to rerun
    Output("evidence_levers", (f"{RESULTS}/evidence_levers.md",), "hand-written", None, None,
           why="notes of benchmarks/evidence_levers.py runs (their commands are in the file)"),
    Output("sgais_reference_diagnostics", (f"{OUT}/sgais_reference_diagnostics.md",), "hand-written", None, None,
           why="notes of one-off runs beside sgais_reference.json"),
)


def table() -> str:
    """The markdown table of the docstring: per output, what --quick does and its estimate."""
    lines = ["| output | committed from | --quick | needs | min | basis |", "|---|---|---|---|---|---|"]
    for output in OUTPUTS:
        runs = output.quick is not None and not output.gpu
        minutes = f"{output.minutes:g}" if runs and output.minutes is not None else "--"
        lines.append(f"| {output.name} | {output.committed} | {output.quick_action()} | "
                     f"{', '.join(output.needs) or '-'} | {minutes} | {output.basis if runs else '--'} |")
    runnable = [o for o in OUTPUTS if o.quick is not None and not o.gpu]
    every = sum(o.minutes for o in runnable)
    without = sum(o.minutes for o in runnable if not NOT_IN_TEST_EXTRA & set(o.needs))
    lines += ["", f"--quick in all: {every:.0f} minutes on 2 CPU cores; {without:.0f} (about {without / 60:.1f} h)",
              f"without the outputs that need {', '.join(sorted(NOT_IN_TEST_EXTRA))} (not installed here)."]
    return "\n".join(lines)


def notes() -> str:
    """One markdown line per output that --quick does not simply rerun, or reruns in part: why."""
    return "\n".join(f"- `{output.name}`: {output.why}" for output in OUTPUTS if output.why)


def missing(modules) -> list[str]:
    return [name for name in modules if importlib.util.find_spec(name) is None]


def backend() -> str:
    """JAX's default backend, asked in a child process (this one stays light)."""
    done = subprocess.run([sys.executable, "-c", "import jax; print(jax.default_backend())"],
                          capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def skip_reason(output: Output, full: bool, on_gpu) -> str | None:
    """Why ``output`` does not run in this mode here, or None."""
    if output.commands(full) is None:
        return "kept: " + (output.why or output.committed)
    if missing(output.needs):
        return f"skipped, committed files kept: needs {', '.join(missing(output.needs))} (not installed)"
    if output.gpu and not on_gpu():
        return "skipped, committed files kept: made on a GPU, and JAX here has none"
    return None


def run_commands(output: Output, full: bool) -> tuple[bool, float]:
    """Run ``output``'s commands in order (the repository on PYTHONPATH); put ``restored``
    back afterwards and ``fresh`` back on a failure; rename what the script wrote."""
    saved = {path: (ROOT / path).read_bytes() for path in output.restored if (ROOT / path).is_file()}
    set_aside = {}
    if full:
        set_aside = {path: (ROOT / path).read_bytes() for path in output.fresh if (ROOT / path).is_file()}
        for path in set_aside:
            (ROOT / path).unlink()
    path = [str(ROOT)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    start, ok = time.perf_counter(), True
    for command in output.commands(full):
        print("    $ python " + " ".join(_quoted(part) for part in command), flush=True)
        if subprocess.run([sys.executable, *command], cwd=ROOT, env=env).returncode != 0:
            ok = False
            break
    seconds = time.perf_counter() - start
    if ok:
        for written, committed in output.renamed.items():
            shutil.move(ROOT / written, ROOT / committed)
    else:
        for path, content in set_aside.items():
            (ROOT / path).write_bytes(content)
    for path, content in saved.items():
        (ROOT / path).write_bytes(content)
    return ok, seconds


def _quoted(part: str) -> str:
    return f"'{part}'" if any(c in part for c in " *") else part


def record(name: str, mode: str, ok: bool, seconds: float, commands):
    """Add this run's time to regenerate_times.json (one entry per output and mode)."""
    times = json.loads(TIMES.read_text()) if TIMES.is_file() else {}
    times.setdefault(name, {})[mode] = {
        "seconds": round(seconds, 1), "ok": ok, "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpu_count": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()],
        "commands": [" ".join(command) for command in commands]}
    TIMES.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")


def chosen(args) -> list[Output]:
    names = {output.name for output in OUTPUTS}
    unknown = set(args.only or ()) - names
    if unknown:
        raise SystemExit(f"unknown output(s) {sorted(unknown)}; known: {', '.join(sorted(names))}")
    outputs = [o for o in OUTPUTS if not args.only or o.name in args.only]
    if args.stale:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import stale_outputs

        stale = {name for name, is_stale, _, _ in stale_outputs.report() if is_stale}
        outputs = [o for o in outputs if stale & set(o.files)]
    return outputs


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", default=True, help="the outputs committed from quick runs")
    mode.add_argument("--full", action="store_true", help="every output, with the commands that made it (hours)")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these outputs (names in the table)")
    parser.add_argument("--stale", action="store_true", help="only the outputs stale_outputs.py finds stale")
    parser.add_argument("--dry-run", action="store_true", help="print what would run, run nothing")
    parser.add_argument("--table", action="store_true", help="print the table of outputs and estimates")
    args = parser.parse_args()
    if args.table:
        print(table())
        return
    full, mode_name = args.full, "full" if args.full else "quick"
    known_backend = []

    def on_gpu():
        if not known_backend:
            known_backend.append(backend())
        return known_backend[0] not in ("cpu", "unknown")

    outputs, failed, total = chosen(args), [], 0.0
    for index, output in enumerate(outputs, 1):
        head = f"[{index}/{len(outputs)}] {output.name}"
        reason = skip_reason(output, full, on_gpu)
        estimate = f", est. {output.minutes:g} min" if output.minutes and not full else ""
        if reason or args.dry_run:
            print(f"{head}: {reason or 'would run'}{'' if reason else estimate}", flush=True)
            for command in ([] if reason else output.commands(full)):
                print("    $ python " + " ".join(_quoted(part) for part in command))
            continue
        print(f"{head}{estimate} ...", flush=True)
        ok, seconds = run_commands(output, full)
        total += seconds
        record(output.name, mode_name, ok, seconds, output.commands(full))
        print(f"{head}: {'done' if ok else 'FAILED'} in {seconds / 60:.1f} min (total {total / 60:.1f} min)",
              flush=True)
        if not ok:
            failed.append(output.name)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
