"""Sharded = unsharded (issue 14): smc, ais, raise_, rts, sgais (positions sharded), particle_filter
and twisted_smc (``particle_sharding``) with the particle axis split over 4 devices,
particle_filter and arm with independent runs split over 4 devices; and the same key giving the
same bits on 1 device, 4 devices and 2 processes x 2 devices (issue 26). CPU devices are forced
in subprocesses (the flag must be set before JAX starts)."""
import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxz
from sharding_check_problem import (DTYPES, ESTIMATORS, MAY_GATHER, case, differing_leaves, from_fingerprint, leaves_of,
                                    same_log_z)

HERE = os.path.dirname(__file__)
# a forced CPU device waits up to 10 minutes (not XLA's 40 s) for the others at a collective:
# on a loaded machine one of them can be descheduled that long
PATIENT = "--xla_cpu_collective_call_terminate_timeout_seconds=600"
# the flags this process runs under (conftest.py's optimization level): the subprocesses'
# runs are compared bit for bit with runs made here, so they compile the same way; but with
# XLA's default (fusion) emitters, as sharding_check_problem.EMITTERS does for the programs
# compared here: under the loop emitters the 1- and 4-device programs differ in the last bit
INHERITED = os.environ.get("XLA_FLAGS", "").replace("--xla_cpu_use_fusion_emitters=false", "").strip()


def _run_check(extended):
    flags = f"{INHERITED} --xla_force_host_platform_device_count=4 {PATIENT}"
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, os.path.join(HERE, "sharding_check.py")] + (["all"] if extended else []),
                         env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return {line["name"]: line for line in map(json.loads, out.stdout.strip().splitlines())}


CORE = ["smc", "ais", "sgais", "particle_filter", "arm_runs"]
EXTENDED = ["raise_", "rts", "twisted_smc", "particle_filter_runs"]


def _check(runs, names):
    assert sorted(runs) == sorted(names)
    for name in names:
        line = runs[name]
        # the same key gives the same bits on 1, 2 and 4 devices (issue 26): every sum over
        # particles adds in one fixed order (jaxz.reduction)
        assert same_log_z(name, line["sharded"], line["plain"]), line
        assert same_log_z(name, line.get("two_devices", line["plain"]), line["plain"]), line
        assert line.get("trace_equal", True), f"{name}: the schedule or another traced value differs"
        assert line.get("two_devices_trace_equal", True), f"{name}: 2 devices give another trace"
        # and the s.e., status, genealogy and final particles (the s.e.'s sums are fixed-order too)
        assert line.get("state_equal", True), f"{name}: the estimate or final state differs"
        if "output_devices" in line:  # the particles (or runs) stay spread over the 4 devices
            assert line["output_devices"] == 4 and not line["output_fully_replicated"], name


def test_sharded_runs_equal_the_one_device_runs():
    """smc, ais, sgais (positions sharded), particle_filter (particle_sharding) and arm (runs
    sharded): one subprocess, one test (pytest-xdist would start a fixture per worker)."""
    _check(_run_check(False), CORE)


@pytest.mark.slow
def test_sharded_runs_equal_the_one_device_runs_for_every_particle_estimator():
    """Also raise_, rts, twisted_smc (particle_sharding) and particle_filter with runs sharded."""
    _check(_run_check(True), CORE + EXTENDED)


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _two_processes(cases, meanwhile):
    """Starts the two processes of tests/multiprocess_check.py on ``cases`` (estimator:dtype),
    calls ``meanwhile()`` while they run (their compiles overlap it), and returns (their
    results, one dict per case, and what ``meanwhile`` returned)."""
    flags = f"{INHERITED} --xla_force_host_platform_device_count=2 {PATIENT}"
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([os.path.dirname(HERE), HERE, os.environ.get("PYTHONPATH", "")]))
    port = _free_port()
    script = os.path.join(HERE, "multiprocess_check.py")
    processes = [subprocess.Popen([sys.executable, script, str(pid), str(port)] + cases, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for pid in (0, 1)]
    try:
        here = meanwhile()
        outputs = [process.communicate(timeout=900) for process in processes]
    finally:
        for process in processes:
            process.kill()
    for process, (_, err) in zip(processes, outputs):
        assert process.returncode == 0, err[-3000:]
    return [json.loads(text) for text in outputs[0][0].strip().splitlines() if text.startswith("{")], here


def _one_device(cases):
    """{case: ({leaf path: array}, log Ẑ)} of each case run in this process on one device."""
    out = {}
    for text in cases:
        name, dtype = text.split(":")
        with jax.enable_x64(dtype == "float64"):
            fn, args = case(name, dtype)
            result = jax.device_get(fn(*args))
        out[text] = leaves_of(result), np.asarray(result[0].log_z, np.float64).tolist()
    return out


def _check_two_processes(cases):
    """Every leaf of (estimate, final state, trace) of each case, run by two processes on 4
    devices, has the bytes of the same run in this process on one device (sgais's
    MODEL_ROUNDING leaves: within ROUNDING_ULPS ulps of their largest magnitude)."""
    lines, reference = _two_processes(cases, lambda: _one_device(cases))
    assert [f"{line['name']}:{line['dtype']}" for line in lines] == cases
    failures = []
    for line in lines:
        plain, log_z = reference[f"{line['name']}:{line['dtype']}"]
        assert sorted(plain) == sorted(line["leaves"])
        differing = differing_leaves(line["name"], plain, from_fingerprint(line["leaves"], plain))
        if differing or not same_log_z(line["name"], line["log_z"], log_z, line["dtype"]):
            failures.append(f"{line['name']} {line['dtype']}: log Z {line['log_z']} (2 processes) vs {log_z} "
                            f"(1 device); differing leaves {differing}")
        # the particles (arm: the runs) stay spread over the 4 devices of both processes
        gathered = [path for path in line["unsplit"] if path not in MAY_GATHER]
        if line["devices"] != 4 or line["replicated"] or gathered:
            failures.append(f"{line['name']} {line['dtype']}: particles on {line['devices']} devices, "
                            f"replicated {line['replicated']}; other state leaves gathered: {gathered}")
    assert not failures, "\n".join(failures)


def test_two_processes_give_the_one_process_bits():
    """Two local processes joined by jax.distributed (gloo collectives on 127.0.0.1), 2
    forced CPU devices each, the particle axis split over all 4: adaptive tempered SMC (64
    particles, a fixed random walk: a cheap compile) gives the log Ẑ, s.e., β schedule,
    genealogy and particles of one process on one device, bit for bit, in float32, and its
    particles stay split over the 4 devices (issue 26)."""
    _check_two_processes(["smc_rwmh:float32"])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES)
def test_two_processes_give_the_one_process_bits_for_every_estimator(dtype):
    """The same for smc (tuned HMC), ais, raise_, sgais (particles split), particle_filter and
    twisted_smc (particle_sharding over the 4 devices) and arm (8 independent runs split): one
    pair of processes for all estimators of a dtype (each start joins a job and compiles)."""
    _check_two_processes([f"{name}:{dtype}" for name in ESTIMATORS])


def test_batch_size_gives_the_unchunked_result():
    """Chunked evaluation (lax.map over 32 particles at a time) changes memory, not values."""
    def log_base(x):
        return -0.5 * jnp.sum(x**2) - jnp.log(2 * jnp.pi)

    path = jaxz.paths.geometric(log_base, lambda x: -0.5 * jnp.sum((x - 1.0) ** 2) / 0.09,
                                sample_base=lambda key, n: jax.random.normal(key, (n, 2)))
    positions = jax.random.normal(jax.random.key(1), (100, 2))
    for make in (lambda b: jaxz.smc(path, jaxz.kernels.hmc(path), batch_size=b, max_mcmc_steps=2,
                                    betas=jnp.linspace(0, 1, 4)),
                 lambda b: jaxz.ais(path, jaxz.kernels.rwmh(path, 0.3), jaxz.schedules.linear(5), batch_size=b)):
        whole, chunked = (jax.jit(lambda key, b=b: jaxz.run(make(b), key, positions, max_steps=8).estimate.log_z)(
            jax.random.key(0)) for b in (None, 32))
        np.testing.assert_allclose(chunked, whole, rtol=1e-5)
    with pytest.raises(ValueError, match="batch_size"):
        jaxz.smc(path, jaxz.kernels.hmc(path), batch_size=0)


def test_shard_particles_rejects_a_particle_count_the_mesh_does_not_divide():
    mesh = jaxz.sharding.mesh(1)
    assert jaxz.shard_particles(jnp.zeros((3, 2)), mesh).shape == (3, 2)
    with pytest.raises(ValueError, match="axis"):
        jaxz.shard_particles(jnp.zeros((3, 2)), mesh, axis="runs")
