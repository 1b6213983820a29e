"""Levers of jaxz.evidence (issue 25, item 2): one configuration on one problem of the
evidence suite, many runs, scored as the suite scores (MSE, coverage of each run's own
s.e., evaluations per run, MSE × evaluations). The measurements and what they decided
are in benchmarks/results/evidence_levers.md.

    python benchmarks/evidence_levers.py eggbox 32 1000 '{"seed": 1, "target_ess": 0.9}'
    python benchmarks/evidence_levers.py "shells d=10" 16 1000 '{"method": "smc"}'

Arguments: problem name (evidence_suite.problems), runs, particles, and a JSON dict of
``jaxz.evidence`` options (plus "seed").
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evidence_suite  # noqa: E402


def main():
    name, runs, particles = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    options = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    seed = int(options.pop("seed", 0))
    problem = evidence_suite.problems(None)[name]
    record = evidence_suite.run_jaxz(problem, runs, seed, num_particles=particles, **options)
    s = evidence_suite.summarize(record, problem.exact)
    print(f"{name} runs={runs} N={particles} {options}: MSE {s['mse']:.4g} (mean error {s['mean_error']:+.3f}, "
          f"sd {s['sd']:.3f}, rms s.e. {s['rms_reported_stderr']:.3f}) coverage {s['coverage']:.3f} "
          f"flagged {s['fraction_flagged']:.2f} log densities {s['log_density_evaluations_per_run']:.0f} "
          f"gradients {s['gradient_evaluations_per_run']:.0f} MSE x evals {s['mse_x_evaluations']:.4g} "
          f"s/run {s['seconds_per_run']:.3f}", flush=True)


if __name__ == "__main__":
    main()
