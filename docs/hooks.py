"""mkdocs hook: publish the committed paper-reproduction figures (paper_repro/out/*.png)
under figures/ without copying them into docs/."""
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]


def on_files(files, config):
    for png in sorted((ROOT / "paper_repro" / "out").glob("*.png")):
        files.append(File.generated(config, f"figures/{png.name}", abs_src_path=str(png)))
    return files
