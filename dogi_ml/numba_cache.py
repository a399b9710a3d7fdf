"""Keys for compiled code: the sources of every project module a kernel can reach.

Numba's ``cache=True`` checks only the file that defines a function. A helper it calls or
inlines from another module (``policies/_online.py``, ``features/extract.py``, ...) can change
without Numba noticing, and a run then executes the old machine code. Here a kernel's key hashes
its own source, the sources of every ``dogi_ml`` module it imports at module level, transitively
(Numba resolves a function's globals in its module's namespace, which those imports fill), and
the versions of dogi_ml, Numba and NumPy.

Two users of the key:

* :class:`ProjectCacheLocator`, put in front of Numba's cache locators by :func:`install` (run by
  ``import dogi_ml``, before any project module defines a Numba function): for every function of
  a ``dogi_ml`` module its source stamp is that key, and its cache lives under
  ``kernel_cache_dir()/numba``, not in the source tree or site-packages;
* ``dogi_ml.sim.kernels.specialise``, which names each specialised loop by the key of its code.

A leaf module: it imports nothing of the project (it sits beside ``dogi_ml/__init__.py`` rather
than in ``dogi_ml.sim`` because importing anything under ``dogi_ml.sim`` runs that package's
``__init__``, which defines Numba functions before the locator could be installed).
"""

from __future__ import annotations

import ast
import atexit
import functools
import hashlib
import json
import os
import pickle
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from numba.core import caching

PROJECT = "dogi_ml"


def kernel_cache_dir() -> Path:
    """Where specialised loops and Numba's cache of project functions live:
    ``$DOGI_ML_KERNEL_CACHE`` or ``~/.cache/dogi_ml/kernels``."""
    return Path(os.environ.get("DOGI_ML_KERNEL_CACHE", Path.home() / ".cache" / "dogi_ml" / "kernels"))


def numba_cache_dir() -> Path:
    """Numba's cache of the project's own ``cache=True`` functions (one folder per module)."""
    return kernel_cache_dir() / "numba"


# -- resolving module names to files, without importing them --------------------------------
_SPECS: dict[str, object] = {}
_FILES: dict[str, str | None] = {}


def _find_spec(name: str):
    """The spec the import system would use for ``name``, found as importlib does (the meta
    path finders, searching the parent package's path) but without importing anything: the
    mapped subpackages (``dogi_ml.features`` -> ``features/``) resolve as installed, and no
    package ``__init__`` runs while a module is still being imported."""
    if name in _SPECS:
        return _SPECS[name]
    parent = name.rpartition(".")[0]
    path = None
    if parent:
        pmod = sys.modules.get(parent)
        if pmod is not None:
            path = getattr(pmod, "__path__", None)
        else:
            pspec = _find_spec(parent)
            path = getattr(pspec, "submodule_search_locations", None) if pspec is not None else None
        if path is None:  # the parent is a plain module: ``name`` is an attribute
            _SPECS[name] = None
            return None
    spec = None
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(name, path, None)
        if spec is not None:
            break
    _SPECS[name] = spec
    return spec


def module_file(name: str) -> str | None:
    """The source file of module ``name`` (the loaded one if it is imported), ``None`` if
    ``name`` is not a module with Python source (an attribute, an extension, a namespace)."""
    if name in _FILES:
        return _FILES[name]
    mod = sys.modules.get(name)
    if mod is not None:
        origin = getattr(mod, "__file__", None)
    else:
        spec = _find_spec(name)
        origin = getattr(spec, "origin", None) if spec is not None else None
    result = origin if isinstance(origin, str) and origin.endswith(".py") and os.path.isfile(origin) else None
    _FILES[name] = result
    return result


def _in_project(name: str, project: str) -> bool:
    return name == project or name.startswith(project + ".")


def _import_records(source: str | bytes) -> list:
    """The import statements ``source`` runs at module level, i.e. outside function bodies
    (imports in ``if``/``try``/``with``/class blocks count), as ``[level, module, names]``:
    ``import a.b`` is ``[0, "a.b", None]``, ``from ..a import b, c`` is ``[2, "a", ["b", "c"]]``."""
    records = []

    def visit(body):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue  # runs later, if ever; a Numba function never sees what it binds
            if isinstance(node, ast.Import):
                records.extend([0, a.name, None] for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                records.append([node.level, node.module or "", [a.name for a in node.names]])
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    visit(inner)
            for case in getattr(node, "cases", ()):  # match statements
                visit(case.body)

    visit(ast.parse(source).body)
    return records


def _resolve(records: list, module: str, is_package: bool, project: str) -> set[str]:
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for level, name, names in records:
        if names is None:
            if _in_project(name, project):
                found.add(name)
            continue
        if level:
            parts = package.split(".") if package else []
            if level - 1 > len(parts):
                continue
            base = ".".join(parts[: len(parts) - (level - 1)])
            name = f"{base}.{name}" if name and base else (name or base)
        if not _in_project(name, project):
            continue
        for alias in names:
            sub = f"{name}.{alias}"
            found.add(sub if alias != "*" and module_file(sub) else name)
    found.discard(module)
    return found


def project_imports(source: str | bytes, module: str, is_package: bool = False, project: str = PROJECT) -> set[str]:
    """The ``project`` modules that ``source`` (the text of module ``module``) imports at module
    level. ``import a.b`` gives ``a.b``; ``from a import b`` gives ``a.b`` if that is a module,
    else ``a``; relative imports resolve against ``module``'s package."""
    return _resolve(_import_records(source), module, is_package, project)


# Parsing is the one slow step (a few ms a file; the simulator and all policies reach ~30), so
# import records are kept on disk by the content hash of the file, which they depend on alone:
# a process that finds them there only reads and hashes its files (~4 ms of CPU for all).
_STORE_VERSION = 1
_STORE: dict | None = None
_STORE_PATH: list[Path] = []
_STORE_NEW: set[str] = set()


def imports_store_path() -> Path:
    """The on-disk memo of module-level import records, keyed by file content hash."""
    return kernel_cache_dir() / "import-records.json"


def _store() -> dict:
    global _STORE
    if _STORE is None:
        path = imports_store_path()
        _STORE_PATH[:] = [path]
        try:
            data = json.loads(path.read_text())
            _STORE = data["records"] if data.get("version") == _STORE_VERSION else {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            _STORE = {}  # none yet, or unreadable: rebuilt as files are parsed
    return _STORE


def _save_store(limit: int = 500) -> None:
    """Merge this process's new records into the file (atomically; the newest ``limit`` kept)."""
    if not _STORE_NEW or not _STORE_PATH:
        return
    path = _STORE_PATH[0]
    try:
        try:
            merged = json.loads(path.read_text())["records"]
        except (OSError, ValueError, KeyError, TypeError):
            merged = {}
        for digest in _STORE_NEW:
            merged.pop(digest, None)
            merged[digest] = _STORE[digest]
        keep = dict(list(merged.items())[-limit:])
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"version": _STORE_VERSION, "records": keep}))
        tmp.replace(path)
        _STORE_NEW.clear()
    except OSError:
        pass  # only a speed-up: the next process parses again


atexit.register(_save_store)

# Per process: a file's digest and project imports, recomputed when its (mtime, size) changes.
_PARSED: dict[tuple[str, str], tuple[tuple[int, int], bytes, frozenset[str]]] = {}


def _parsed(path: str, module: str, project: str) -> tuple[bytes, frozenset[str]]:
    st = os.stat(path)
    sig = (st.st_mtime_ns, st.st_size)
    hit = _PARSED.get((path, module))
    if hit is not None and hit[0] == sig:
        return hit[1], hit[2]
    digest, records = _digest_and_records(Path(path).read_bytes())
    imports = frozenset(_resolve(records, module, os.path.basename(path) == "__init__.py", project))
    _PARSED[(path, module)] = (sig, digest, imports)
    return digest, imports


def _digest_and_records(data: bytes) -> tuple[bytes, list]:
    digest = hashlib.blake2b(data, digest_size=16).digest()
    store = _store()
    records = store.get(digest.hex())
    if records is None:
        records = store[digest.hex()] = _import_records(data)
        _STORE_NEW.add(digest.hex())
    return digest, records


def _closure(imports, module: str, project: str) -> dict[str, str]:
    todo = list(imports)
    seen: dict[str, str | None] = {module: None}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = seen[name] = module_file(name)
        if path is not None:
            todo.extend(_parsed(path, name, project)[1])
    del seen[module]
    return {name: path for name, path in seen.items() if path is not None}


def import_closure(
    source: str | bytes, module: str, is_package: bool = False, project: str = PROJECT
) -> dict[str, str]:
    """Every ``project`` module reachable from ``source`` through module-level imports
    (transitively), as ``{module name: source file}``; ``module`` itself is not included."""
    return _closure(project_imports(source, module, is_package, project), module, project)


#: environment variables read when kernels are compiled (``export.numba_kernel``: the int8
#: kernel's IR without ``pmaddwd``); part of every key when set
BUILD_SWITCHES = ("DOGI_ML_INT8_PORTABLE",)


@functools.cache
def versions() -> str:
    """The versions a compiled kernel depends on besides the project's sources."""
    import numba
    import numpy

    project = sys.modules.get(PROJECT)
    found = (
        f"{PROJECT} {getattr(project, '__version__', '?')}; numba {numba.__version__}; "
        f"numpy {numpy.__version__}; python {sys.version.split()[0]}"
    )
    # switches that change the code generated (only when set, so the usual keys stay as they are)
    for switch in BUILD_SWITCHES:
        if os.environ.get(switch, "") not in ("", "0"):
            found += f"; {switch}={os.environ[switch]}"
    return found


def _key(own: bytes, closure: dict[str, str], project: str) -> str:
    h = hashlib.blake2b(own, digest_size=16)
    for name, path in sorted(closure.items()):
        h.update(b"\0" + name.encode() + b"\0")
        h.update(_PARSED[(path, name)][1])  # _closure just brought it up to date
    h.update(versions().encode())
    return h.hexdigest()


def source_key(source: str | bytes, module: str, is_package: bool = False, project: str = PROJECT) -> str:
    """A hex key of ``source`` (module ``module``'s text), the sources of every project module
    it reaches (:func:`import_closure`) and :func:`versions`: any edit to one of them, or an
    upgrade, gives a new key."""
    own, records = _digest_and_records(source.encode() if isinstance(source, str) else source)
    return _key(own, _closure(_resolve(records, module, is_package, project), module, project), project)


_KEYS: dict[tuple[str, str, str], tuple[tuple, str]] = {}


def _sig(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def module_key(module: str, path: str, project: str = PROJECT) -> str:
    """:func:`source_key` of the module file ``path``. Memoised per process; a memo stands while
    none of the files it covers changed (mtime, size), so a reload after an edit sees the edit."""
    memo = _KEYS.get((module, path, project))
    if memo is not None and all(_sig(f) == sig for f, sig in memo[0]):
        return memo[1]
    own, imports = _parsed(path, module, project)
    closure = _closure(imports, module, project)
    key = _key(own, closure, project)
    files = ((path, module), *((f, name) for name, f in closure.items()))
    _KEYS[(module, path, project)] = (tuple((f, _PARSED[(f, name)][0]) for f, name in files), key)
    return key


# -- Numba cache locator ---------------------------------------------------------------------
_CacheLocator = caching._CacheLocator
_FALLBACK_DIR: list[Path] = []


@atexit.register
def _drop_fallback_dir() -> None:
    for d in _FALLBACK_DIR:
        shutil.rmtree(d, ignore_errors=True)


class ProjectCacheLocator(_CacheLocator):
    """Numba cache locator for functions of ``dogi_ml`` modules: the source stamp is
    :func:`module_key` (the module and everything it imports from the project, plus versions),
    the cache folder ``numba_cache_dir()/<module>-<hash of the file's path>``."""

    def __init__(self, py_func, py_file: str, root: Path):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._module = py_func.__module__
        where = hashlib.blake2b(os.path.abspath(py_file).encode(), digest_size=4).hexdigest()
        self._cache_path = str(root / f"{self._module}-{where}")

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> str:
        return module_key(self._module, self._py_file)

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func, py_file):
        module = getattr(py_func, "__module__", None) or ""
        if not _in_project(module, PROJECT) or not os.path.isfile(py_file):
            return None
        self = cls(py_func, py_file, numba_cache_dir())
        try:
            self.ensure_cache_path()
        except OSError as exc:
            # Never fall back to Numba's own locators (they key on this file alone): cache in a
            # private folder for this process instead, which cannot be stale.
            if not _FALLBACK_DIR:
                _FALLBACK_DIR.append(Path(tempfile.mkdtemp(prefix="dogi_ml-numba-")))
                warnings.warn(
                    f"kernel cache {numba_cache_dir()} is not writable ({exc}); compiled "
                    f"code is cached for this process only. Set DOGI_ML_KERNEL_CACHE to a "
                    f"writable folder to keep it across runs.",
                    RuntimeWarning,
                    stacklevel=2,
                )
            self = cls(py_func, py_file, _FALLBACK_DIR[0])
            self.ensure_cache_path()
        return self


def _locator_classes() -> list:
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
    return impl._locator_classes


def _tolerant_load_index(load_index):
    """Wrap Numba's index loader: an index naming a type whose module this process cannot import
    (a project kernel once compiled for a state type defined in a test or a scratch script) is a
    cache miss, not a crash; the next save rewrites the index without that entry."""

    @functools.wraps(load_index)
    def load(self):
        try:
            return load_index(self)
        except (ImportError, AttributeError, pickle.UnpicklingError, EOFError) as exc:
            roots = [str(kernel_cache_dir()), *map(str, _FALLBACK_DIR)]
            if not str(self._index_path).startswith(tuple(roots)):
                raise
            warnings.warn(
                f"kernel cache index {self._index_path} is unreadable here ({exc}); recompiling",
                RuntimeWarning,
                stacklevel=2,
            )
            return {}

    load._dogi_ml_tolerant = True
    return load


def install() -> None:
    """Put :class:`ProjectCacheLocator` first among Numba's cache locators and make index loads
    tolerant of entries this process cannot unpickle (idempotent)."""
    classes = _locator_classes()
    if not any(c.__name__ == ProjectCacheLocator.__name__ and c.__module__ == __name__ for c in classes):
        classes.insert(0, ProjectCacheLocator)
    index_file = caching.IndexDataCacheFile
    if not getattr(index_file._load_index, "_dogi_ml_tolerant", False):
        index_file._load_index = _tolerant_load_index(index_file._load_index)
