"""Which committed outputs may be stale: for every JSON in benchmarks/results/ and
paper_repro/out/, the jaxz commit it was made with (its ``machine.jaxz_commit`` or
``meta.jaxz_commit`` stamp, ``jaxz._provenance``; for a file made before the stamps, the
last commit that changed the file, marked ``~``) and the library modules changed since
(estimators, kernels, models, approximations, and the rest of jaxz/), newest first.

A module changed since is not proof that the output moved (a docstring counts too), only
that it should be looked at before its numbers are quoted.

Run:  python benchmarks/stale_outputs.py [--all]   (prints a markdown table; writes nothing)
"""
import argparse
import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("benchmarks/results", "paper_repro/out")


def git(*args) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def stamp(path: Path) -> str | None:
    """The jaxz commit recorded in the file, or None."""
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    for section in ("machine", "meta"):
        about = data.get(section)
        if isinstance(about, dict) and about.get("jaxz_commit"):
            return about["jaxz_commit"]
    return None


def made_with(path: Path) -> tuple[str, bool] | None:
    """(commit, stamped) of ``path``: its stamp, else the last commit that changed it."""
    commit = stamp(path)
    if commit:
        return commit, True
    last = git("log", "-1", "--format=%H", "--", str(path.relative_to(ROOT)))
    return (last, False) if last else None


def changed_since(commit: str) -> list[str]:
    """The jaxz/ modules that differ between ``commit`` and HEAD (not ``_provenance.py``,
    which writes the stamp and computes nothing)."""
    names = git("diff", "--name-only", commit, "HEAD", "--", "jaxz").splitlines()
    return sorted(name.removeprefix("jaxz/") for name in names
                  if name.endswith(".py") and name not in ("jaxz/provenance.py", "jaxz/_provenance.py"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="list the outputs with nothing changed since too")
    args = parser.parse_args()
    rows = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).glob("*.json")):
            made = made_with(path)
            if made is None:
                continue
            commit, stamped = made
            modules = changed_since(commit)
            if modules or args.all:
                date = git("log", "-1", "--format=%cs", commit)
                rows.append((date, path.relative_to(ROOT).as_posix(), commit[:7] + ("" if stamped else "~"), modules))
    print("| output | made with | on | jaxz modules changed since |")
    print("|---|---|---|---|")
    for date, name, commit, modules in sorted(rows, key=lambda row: row[0]):
        listed = ", ".join(modules[:8]) + (f" and {len(modules) - 8} more" if len(modules) > 8 else "")
        print(f"| {name} | {commit} | {date} | {listed or 'none'} |")


if __name__ == "__main__":
    main()
