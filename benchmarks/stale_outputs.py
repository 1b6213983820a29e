"""Which committed outputs are stale: for every file in benchmarks/results/ and
paper_repro/out/, whether the code that made it has changed since.

A script's JSON carries stamps (``jaxz._provenance.describe``: under ``machine`` or
``meta``, and one per merged part or nested step, such as a reference computed later): each
names the jaxz modules and the script files the run could reach, with a hash of each file's
code (``code_stamp``; docstrings, comments and layout do not count). An output is stale when
a file named in one of its stamps hashes differently now, or is gone; it is listed as stale
too, with the reason, when its JSON has no stamp, or a stamp from before the hashes (a
commit only), or when one of its merged parts has such a stamp. A .md or .png goes with the
JSON of the same name beside it (the script writes both); one with no JSON beside it is a
hand-written record. Nothing is imported but the standard library: the current hashes come
from parsing the files.

Run:  python benchmarks/stale_outputs.py [--all]   (prints a markdown table; writes nothing)
"""
import argparse
import importlib.util
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("benchmarks/results", "paper_repro/out")
SUFFIXES = (".json", ".md", ".png")
NOT_RESULTS = {"benchmarks/results/regenerate_times.json"}  # regenerate.py's log of its own run times


def provenance():
    """jaxz/_provenance.py loaded by its path, so that jaxz (and jax) are not imported."""
    spec = importlib.util.spec_from_file_location("_jaxz_provenance", ROOT / "jaxz" / "_provenance.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def git(*args) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def stamps(data) -> list[dict]:
    """Every stamp in a JSON document: the dicts holding ``jaxz_commit`` or ``modules``, and the
    machine descriptions (``cpu_count`` and ``platform``) of runs made before the stamps."""
    found = []
    if isinstance(data, dict):
        if "jaxz_commit" in data or isinstance(data.get("modules"), dict) or {"cpu_count", "platform"} <= set(data):
            found.append(data)
        for value in data.values():
            found += stamps(value)
    elif isinstance(data, list):
        for value in data:
            found += stamps(value)
    return found


class Hashes:
    """The current code hash of a module (``jaxz.estimators.smc``) or script
    (``benchmarks/calibration.py``), None if the file is gone; each file parsed once."""

    def __init__(self):
        self.provenance = provenance()
        self.known = {}

    def now(self, name: str, script: bool) -> str | None:
        if (name, script) not in self.known:
            path = ROOT / name if script else self.provenance.module_file(name, ROOT / "jaxz")
            self.known[name, script] = (self.provenance.code_hash(path.read_text())
                                        if path is not None and path.is_file() else None)
        return self.known[name, script]


def verdict(path: Path, hashes: Hashes) -> tuple[bool, str, str | None]:
    """(stale, why, the jaxz commit of its first stamp) for one JSON output."""
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        return True, "not readable as JSON", None
    found = stamps(data)
    commit = next((s.get("jaxz_commit") for s in found if s.get("jaxz_commit")), None)
    if not found:
        return True, "no stamp (made before jaxz._provenance)", commit
    changed = set()
    for stamp in found:
        for kind, script in (("modules", False), ("scripts", True)):
            for name, recorded in (stamp.get(kind) or {}).items():
                now = hashes.now(name, script)
                if now != recorded:
                    changed.add(f"{name} (gone)" if now is None else name)
    unhashed = sum("modules" not in stamp for stamp in found)
    reasons = []
    if unhashed:
        reasons.append(f"{unhashed} of {len(found)} stamps without code hashes (runs made before them)"
                       if len(found) > 1 else "stamp without code hashes (made before them)")
    if changed:
        listed = sorted(changed)
        reasons.append("code changed: " + ", ".join(listed[:8]) + (f" and {len(listed) - 8} more"
                                                                     if len(listed) > 8 else ""))
    return bool(reasons), "; ".join(reasons) or "code unchanged", commit


def outputs() -> list[Path]:
    """The committed result files (and any written since), folder by folder."""
    files = []
    for folder in FOLDERS:
        files += sorted(p for p in (ROOT / folder).iterdir() if p.suffix in SUFFIXES
                        and p.relative_to(ROOT).as_posix() not in NOT_RESULTS)
    return files


def report(paths=None) -> list[tuple[str, bool, str, str]]:
    """(output, stale, why, made with) for ``paths`` (default: every output); a .md or .png
    follows the JSON of the same name beside it."""
    hashes, rows, judged = Hashes(), [], {}
    for path in paths or outputs():
        json_path = path.with_suffix(".json")
        name = path.relative_to(ROOT).as_posix()
        if not json_path.is_file():
            rows.append((name, True, "hand-written record (no JSON beside it, no stamp)", ""))
            continue
        if json_path not in judged:
            judged[json_path] = verdict(json_path, hashes)
        stale, why, commit = judged[json_path]
        if path != json_path:
            why = f"as {json_path.name}: {why}"
        if commit:
            made = f"{commit[:7]} ({git('log', '-1', '--format=%cs', commit) or '?'})"
        else:
            last = git("log", "-1", "--format=%h (%cs)", "--", name)
            made = f"~{last}" if last else "uncommitted"
        rows.append((name, stale, why, made))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="list the outputs whose code is unchanged too")
    args = parser.parse_args()
    rows = report()
    print("| output | made with (jaxz commit, or ~ the file's last commit) | stale because |")
    print("|---|---|---|")
    for name, stale, why, made in rows:
        if stale or args.all:
            print(f"| {name} | {made} | {why if stale else 'fresh: ' + why} |")
    print(f"\n{sum(row[1] for row in rows)} of {len(rows)} outputs stale.")


if __name__ == "__main__":
    main()
