"""Where a committed result came from: the machine it ran on and the code it ran.

The benchmark and paper_repro scripts stamp their JSON with ``describe()``, so a reader
(or a later session, ``benchmarks/stale_outputs.py``) can tell an output made by today's
estimators from one that predates a change to them.

The stamp names the code the script can reach and a hash of each file's code
(``code_stamp``). ``import jaxz`` loads every module of the package, so the modules in
``sys.modules`` would name all of them; the reach is read from the sources instead: the
script's imports and the attributes it reads from an imported package (``jaxz.smc`` ->
``jaxz.estimators.smc``), then every import of each module reached, followed through
re-exports to the module that defines the name. A package's ``__init__`` only re-exports,
so it is read for where its names come from and is not itself followed. Names built at run
time (``getattr(module, variable)``) and data files are not seen.

Only the standard library is imported at module level, so that ``stale_outputs.py`` can load
this file by its path and hash the current sources without importing jax or jaxz.
"""
import ast
import hashlib
import os
import platform
import subprocess
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGE = PACKAGE_DIR.name
NOT_STAMPED = {f"{PACKAGE}._provenance"}  # writes the stamp, computes nothing
SCRIPT_FOLDERS = ("benchmarks", "paper_repro")  # where a script's local imports may live


def _canonical(node) -> str:
    """The syntax tree as text, fields that are None or empty left out (so that the text
    does not depend on which optional fields a Python version's ``ast`` spells out)."""
    if isinstance(node, ast.AST):
        fields = [f"{name}={_canonical(value)}" for name, value in ast.iter_fields(node)
                  if value is not None and value != []]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return "[" + ", ".join(_canonical(item) for item in node) + "]"
    return repr(node)


def code_hash(source: str) -> str:
    """The first 16 hex digits of the sha256 of ``source``'s syntax tree with the module's,
    classes' and functions' docstrings taken out: comments, docstrings and layout do not
    change it, a change to the code does."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:]
    return hashlib.sha256(_canonical(tree).encode()).hexdigest()[:16]


def module_file(name: str, package_dir: Path = PACKAGE_DIR) -> Path | None:
    """The file of module ``name`` of the package in ``package_dir`` (``jaxz.estimators.smc``
    -> ``jaxz/estimators/smc.py``, a package -> its ``__init__.py``), or None."""
    parts = name.split(".")
    if parts[0] != package_dir.name:
        return None
    base = package_dir.parent.joinpath(*parts)
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def script_key(path: Path) -> str:
    """How a script is named in the stamp: its folder and file, ``benchmarks/calibration.py``."""
    return f"{path.parent.name}/{path.name}"


class _Reach:
    """The package modules and local script modules that the code of some scripts can reach."""

    def __init__(self, package_dir: Path):
        self.package_dir = package_dir
        self.trees = {}
        self.modules = set()
        self.scripts = {}

    def tree(self, path: Path) -> ast.Module:
        if path not in self.trees:
            self.trees[path] = ast.parse(path.read_text())
        return self.trees[path]

    def in_package(self, name: str) -> bool:
        return name == self.package_dir.name or name.startswith(self.package_dir.name + ".")

    def is_package(self, name: str) -> bool:
        path = module_file(name, self.package_dir)
        return path is not None and path.name == "__init__.py"

    def resolve(self, module: str, name: str, seen=frozenset()) -> tuple[str, bool]:
        """(the module that defines ``module.name``, whether that name is the module itself),
        following re-exports (``from jaxz.estimators.smc import smc`` in ``jaxz/__init__``)."""
        submodule = f"{module}.{name}"
        path = module_file(module, self.package_dir)
        binding = None
        if path is not None and (module, name) not in seen:
            for node in _top_level(self.tree(path)):
                binding = _binding(node, name, module, self.is_package(module)) or binding
        if binding is None:
            return (submodule, True) if module_file(submodule, self.package_dir) else (module, False)
        kind, source, original = binding
        if kind == "defined" or not self.in_package(source):
            return module, False
        if kind == "module":
            return source, True
        if source == module and module_file(submodule, self.package_dir):
            return submodule, True  # `from jaxz import reduction` inside jaxz/__init__
        return self.resolve(source, original, seen | {(module, name)})

    def use_module(self, name: str):
        """Count module ``name`` in and follow its imports (not a package's: it re-exports)."""
        if name in self.modules or name in NOT_STAMPED:
            return
        path = module_file(name, self.package_dir)
        if path is None:
            return
        self.modules.add(name)
        if path.name != "__init__.py":
            self.follow(path, package=name.rpartition(".")[0])

    def use_binding(self, target: str, is_module: bool, bound: str, tree: ast.Module):
        """A name bound by an import: a function or value counts its module; a module counts
        itself; a package counts what is read from it (``jaxz.kernels.hmc``)."""
        if not is_module or not self.is_package(target):
            self.use_module(target)
            return
        chains, bare = _attribute_chains(tree, bound)
        for chain in chains:
            current = target
            for attribute in chain:
                current, is_module = self.resolve(current, attribute)
                if not is_module or not self.is_package(current):
                    break
            self.use_module(current)
        if bare:
            self.use_module(target)

    def use_script(self, path: Path):
        key = script_key(path)
        if key not in self.scripts:
            self.scripts[key] = path
            self.follow(path, package=None)

    def local_script(self, name: str, importer: Path) -> Path | None:
        """The repository file a script's ``import name`` finds (its own folder, the script
        folders beside it, or ``benchmarks._results`` from the repository root), or None."""
        root = importer.parent.parent
        folders = [importer.parent, root] + [root / folder for folder in SCRIPT_FOLDERS]
        for folder in folders:
            path = folder.joinpath(*name.split(".")).with_suffix(".py")
            if path.is_file():
                return path
        return None

    def follow(self, path: Path, package: str | None):
        """Every import in ``path``, those inside functions included."""
        tree = self.tree(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(node, package)
                if self.in_package(source):
                    for alias in node.names:
                        target, is_module = self.resolve(source, alias.name)
                        self.use_binding(target, is_module, alias.asname or alias.name, tree)
                elif package is None and node.level == 0 and (local := self.local_script(source, path)):
                    self.use_script(local)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if self.in_package(alias.name):
                        if alias.asname:
                            self.use_binding(alias.name, True, alias.asname, tree)
                        else:
                            top = alias.name.split(".")[0]
                            self.use_binding(top, True, top, tree)
                    elif package is None and (local := self.local_script(alias.name, path)):
                        self.use_script(local)


def _top_level(tree: ast.Module):
    """The module-level statements, those inside a module-level ``if`` or ``try`` included."""
    for node in tree.body:
        if isinstance(node, (ast.If, ast.Try)):
            yield from _top_level(ast.Module(body=node.body + node.orelse + getattr(node, "finalbody", [])
                                             + [s for h in getattr(node, "handlers", []) for s in h.body]))
        else:
            yield node


def _absolute(node: ast.ImportFrom, package: str | None) -> str:
    """The absolute module name of ``from <node.module> import ...`` (relative imports too)."""
    if not node.level:
        return node.module or ""
    base = (package or "").split(".")
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _binding(node, name: str, module: str, is_package: bool):
    """How a module-level statement binds ``name``: ("defined", module, name),
    ("module", imported module, name) or ("from", source module, its name there); None if not."""
    if isinstance(node, ast.ImportFrom):
        for alias in node.names:
            if (alias.asname or alias.name) == name:
                return "from", _absolute(node, module if is_package else module.rpartition(".")[0]), alias.name
    elif isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname == name:
                return "module", alias.name, name
            if alias.asname is None and alias.name.split(".")[0] == name:
                return "module", name, name
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
        return "defined", module, name
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(n, ast.Name) and n.id == name for t in targets for n in ast.walk(t)):
            return "defined", module, name
    return None


def _attribute_chains(tree: ast.Module, bound: str) -> tuple[list, bool]:
    """The attribute chains read from the name ``bound`` in ``tree`` (``jaxz.kernels.hmc``
    -> ["kernels", "hmc"]; ``getattr(jaxz, "STATUS_OK")`` -> ["STATUS_OK"]), and whether the
    name is also used bare."""
    chains, bare = [], False

    class Visitor(ast.NodeVisitor):
        def visit_Attribute(self, node):
            parts, current = [], node
            while isinstance(current, ast.Attribute):
                parts.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name) and current.id == bound:
                chains.append(parts[::-1])
            else:
                self.generic_visit(node)

        def visit_Call(self, node):
            func, args = node.func, node.args
            if isinstance(func, ast.Name) and func.id == "getattr" and len(args) >= 2 \
                    and isinstance(args[0], ast.Name) and args[0].id == bound \
                    and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
                chains.append([args[1].value])
                for extra in args[2:]:
                    self.visit(extra)
            else:
                self.generic_visit(node)

        def visit_Name(self, node):
            nonlocal bare
            bare = bare or node.id == bound

    Visitor().visit(tree)
    return chains, bare


def code_stamp(*entries, package_dir: Path = PACKAGE_DIR) -> dict:
    """``{"modules": {name: code_hash}, "scripts": {"folder/file.py": code_hash}}`` for the
    package modules and local script modules that the scripts ``entries`` (paths; default:
    the running ``__main__``) can reach; empty where there is no script file (an interpreter)."""
    if not entries:
        main = getattr(sys.modules.get("__main__"), "__file__", None)
        entries = (main,) if main else ()
    reach = _Reach(package_dir)
    for entry in entries:
        reach.use_script(Path(entry).resolve())
    modules = {name: code_hash(module_file(name, package_dir).read_text()) for name in sorted(reach.modules)}
    scripts = {key: code_hash(path.read_text()) for key, path in sorted(reach.scripts.items())}
    return {"modules": modules, "scripts": scripts}


def source() -> dict:
    """The jaxz commit that is imported (``git rev-parse HEAD`` of the checkout holding
    the package) and whether ``jaxz/`` differs from it (``git status --porcelain``), or
    None for each where jaxz is not a git checkout (an installed wheel) or git is missing."""
    import jaxz

    def git(*args):
        try:
            done = subprocess.run(["git", "-C", str(PACKAGE_DIR), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".") if commit else None
    return {"jaxz_version": jaxz.__version__, "jaxz_commit": commit,
            "jaxz_modified": None if status is None else bool(status)}


def describe(**extra) -> dict:
    """Platform, cores, JAX version and backend, devices, the load average now, the jaxz
    source (``source``) and the code the running script can reach with its hashes
    (``code_stamp``); ``extra`` is added as given."""
    import jax

    devices = jax.devices()
    return dict(platform=platform.platform(), cpu_count=os.cpu_count(), jax=jax.__version__,
                backend=jax.default_backend(), devices=[str(d) for d in devices],
                device_kind=devices[0].device_kind, load_average=list(os.getloadavg()),
                **source(), **code_stamp(), **extra)
