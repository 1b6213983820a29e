"""Where a committed result came from: ``describe()`` stamps a benchmark's or paper script's
JSON with the machine, the jaxz commit and a code hash of every module and script the run can
reach (``code_stamp``), which ``benchmarks/stale_outputs.py`` compares with the code now. The
implementation lives in ``jaxz/_provenance.py``, which that script loads by its path without
importing jax."""
from jaxz._provenance import code_hash, code_stamp, describe, module_file, script_key, source  # noqa: F401

__all__ = ["describe", "source", "code_stamp", "code_hash", "module_file", "script_key"]
