"""Stamps say which code made a committed output, and a later change to that code, and only
to it, marks the output stale (``jaxz._provenance``, ``benchmarks/stale_outputs.py``,
``benchmarks/regenerate.py``). Parsing only: nothing here runs an estimator."""
import json
import sys
from pathlib import Path

from jaxz._provenance import code_hash, code_stamp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import regenerate  # noqa: E402
import stale_outputs  # noqa: E402

MODULE = '''"""A module."""
import math


def area(radius):
    """The area of a disc."""
    return math.pi * radius ** 2  # pi r^2
'''


def test_code_hash_ignores_docstrings_and_comments_but_not_code():
    same = MODULE.replace('"""The area of a disc."""', '"""Area of a disc of the given radius,\n    in m²."""')
    same = same.replace("# pi r^2", "# the formula").replace('"""A module."""', "")
    same = same.replace("radius ** 2", "radius**2") + "\n\n# trailing comment\n"
    assert code_hash(same) == code_hash(MODULE)
    assert code_hash(MODULE.replace("radius ** 2", "radius ** 3")) != code_hash(MODULE)
    assert code_hash(MODULE.replace("def area(radius):", "def area(radius, scale=1):")) != code_hash(MODULE)


def test_code_stamp_names_the_modules_a_script_reaches_and_not_the_others(tmp_path):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "_helper.py").write_text("from jaxz.models import rbm\n\n\ndef f():\n    return rbm.exact_log_z\n")
    (folder / "script.py").write_text("import jaxz\nimport _helper\n\nprint(jaxz.mbar, _helper.f())\n")
    stamp = code_stamp(folder / "script.py")
    assert {"jaxz.estimators.mbar", "jaxz.models.rbm", "jaxz.weights"} <= set(stamp["modules"])
    assert not {"jaxz.estimators.rts", "jaxz.estimators.smc", "jaxz", "jaxz._provenance"} & set(stamp["modules"])
    assert set(stamp["scripts"]) == {"benchmarks/script.py", "benchmarks/_helper.py"}
    mbar = ROOT / "jaxz" / "estimators" / "mbar.py"
    assert stamp["modules"]["jaxz.estimators.mbar"] == code_hash(mbar.read_text())


def test_an_output_is_stale_when_a_module_in_its_stamp_changed(tmp_path):
    weights = code_hash((ROOT / "jaxz" / "weights.py").read_text())
    script = code_hash((ROOT / "benchmarks" / "stale_outputs.py").read_text())
    hashes = stale_outputs.Hashes()

    def judge(stamp):
        path = tmp_path / "out.json"
        path.write_text(json.dumps({"machine": stamp, "values": [1.0]}))
        return stale_outputs.verdict(path, hashes)

    fresh = {"jaxz_commit": "0" * 40, "modules": {"jaxz.weights": weights},
             "scripts": {"benchmarks/stale_outputs.py": script}}
    assert not judge(fresh)[0]
    stale, why, _ = judge({**fresh, "modules": {"jaxz.weights": "0" * 16}})
    assert stale and "jaxz.weights" in why
    stale, why, _ = judge({**fresh, "modules": {"jaxz.no_such_module": weights}})
    assert stale and "gone" in why
    stale, why, _ = judge({"jaxz_commit": "0" * 40})
    assert stale and "without code hashes" in why
    assert judge({"cpu_count": 2})[0]  # no stamp at all


def test_regenerate_knows_every_committed_output_once():
    known = [name for output in regenerate.OUTPUTS for name in output.files]
    assert len(known) == len(set(known)), "an output listed twice in regenerate.OUTPUTS"
    committed = {path.relative_to(ROOT).as_posix() for path in stale_outputs.outputs()}
    assert committed - set(known) == set(), "outputs regenerate.py does not know how to make"
    assert set(known) - committed == set(), "regenerate.OUTPUTS lists files that are not there"
    for output in regenerate.OUTPUTS:
        for mode in (False, True):
            for command in output.commands(mode) or ():
                assert (ROOT / command[0]).is_file(), command


def test_regenerate_docstring_holds_its_table():
    assert regenerate.table() in regenerate.__doc__
