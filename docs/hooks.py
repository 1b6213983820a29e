"""mkdocs hook: publish the committed figures (paper_repro/out/*.png and the evidence
suite's benchmarks/results/evidence_suite.png) under figures/ without copying them into docs/."""
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]


def on_files(files, config):
    figures = sorted((ROOT / "paper_repro" / "out").glob("*.png"))
    figures += sorted((ROOT / "benchmarks" / "results").glob("*.png"))
    for png in figures:
        files.append(File.generated(config, f"figures/{png.name}", abs_src_path=str(png)))
    return files
