"""Checkpoints of a running simulation: the whole :class:`~dogi_ml.sim.Simulator` (engine state,
the policy object with its state, models, optimizers, sample rings and random generators), the
process-wide random states and the position in the write stream, on disk, atomically.

A checkpoint is taken at a chunk boundary (``Simulator.feed``'s ``after_chunk``), after the
policy's ``between_chunks``: nothing the run's outcome depends on is in flight there except the
background jobs a policy may have submitted, and their results are by design independent of when
they finish (``tests/test_background_timing.py``), so the pickler waits for each one and stores
its result. The mechanism is general: one pickle of the simulator, with

- the trace and the write stream referenced, not copied (``externals``: the job's rerun supplies
  the same ones, which the identity's trace digest guarantees);
- thread pools stored as their settings after their queued jobs are drained, futures as their
  results, locks and events as fresh ones, Numba dispatchers by their import name;
- the compiled loop rebuilt from the policy's functions (``Simulator.__setstate__``).

A policy whose state cannot be pickled says why through ``checkpoint_problem()`` (a string, or
None), checked before the run starts.

File layout: the 8-byte magic, the header length (8 bytes, little-endian), a JSON header (the
job's identity and the position), then the pickle. A checkpoint whose identity differs from the
job's is refused naming the first differing key; it is never resumed silently.
"""

from __future__ import annotations

import ast
import concurrent.futures
import hashlib
import json
import os
import pickle
import random
import struct
import sys
import threading
import time
from pathlib import Path

import numpy as np

from dogi_ml.errors import ConfigError

MAGIC = b"DOGICKP1"
FILE_NAME = "simulation.ckpt"

#: the project's packages whose source makes the code version (files, not imports: sim imports
#: nothing above it)
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_CODE_DIRS = ("dogi_ml", "features", "models", "markov", "rl", "oracles", "export")
_code_version: str | None = None


def code_version() -> str:
    """16 hex digits of SHA-256 over the project's Python sources (path and content of every
    ``*.py`` file of its packages): any edit of the code gives another version. Computed once per
    process, so the code a run started with is the code it is checked against."""
    global _code_version
    if _code_version is None:
        _code_version = sources_version(path for d in _CODE_DIRS for path in (_PACKAGE_ROOT / d).rglob("*.py"))
    return _code_version


def sources_version(paths) -> str:
    """16 hex digits of SHA-256 over the files' paths (relative to the project) and contents, in
    path order."""
    h = hashlib.sha256()
    for path in sorted({Path(p).resolve() for p in paths}):
        h.update(str(path.relative_to(_PACKAGE_ROOT)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def import_closure(module: str) -> list[Path]:
    """The source files of ``module`` and of every project module it imports, directly or not, with
    the packages each import runs (their ``__init__``): ``module``'s own ``import`` statements
    anywhere in the file, and the module-level ones of the modules it reaches (an import inside
    one of their functions, such as ``dogi_ml``'s lazily loaded API, runs only when called). What
    a result computed by ``module``'s functions depends on, short of files read as text (the
    simulator's loop template: add it by hand) and functions of theirs that import lazily."""
    import importlib.util

    def origin(name: str) -> Path | None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        path = Path(spec.origin).resolve()
        return path if path.is_relative_to(_PACKAGE_ROOT) and "site-packages" not in path.parts else None

    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        if name in seen or not name.startswith("dogi_ml"):
            continue
        path = origin(name)
        if path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:k]) for k in range(1, len(parts))]  # the packages it runs
        package = name if path.name == "__init__.py" else ".".join(parts[:-1])
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree) if name == module else _module_level(tree):
            if isinstance(node, ast.Import):
                todo += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                todo.append(base)
                # ``from package import module`` imports the module
                todo += [f"{base}.{alias.name}" for alias in node.names if alias.name != "*"]
    return sorted(set(seen.values()))


def _module_level(tree):
    """The statements of a module run on import: its body, into ``if``/``try``/``with`` blocks but
    not into functions or classes' methods."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef, ast.ExceptHandler)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo += getattr(node, field, [])


def array_digest(*arrays) -> str:
    """16 hex digits of SHA-256 over the arrays' dtypes, shapes and bytes (None entries count)."""
    h = hashlib.sha256()
    for a in arrays:
        if a is None:
            h.update(b"none\0")
            continue
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}\0".encode())
        h.update(memoryview(a).cast("B"))
    return h.hexdigest()[:16]


def flat_identity(prefix: str, value) -> dict:
    """``value`` (nested dicts/lists of plain values) as ``{dotted.key: json text}``."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(flat_identity(f"{prefix}.{k}" if prefix else str(k), v))
        return out
    return {prefix: json.dumps(value, sort_keys=True, default=repr)}


class CheckpointError(ConfigError):
    """A checkpoint that cannot be written or read as asked."""


# -- the pickler ------------------------------------------------------------------------------
def _done_future(result):
    future = concurrent.futures.Future()
    future.set_result(result)
    return future


def _failed_future(exc):
    future = concurrent.futures.Future()
    future.set_exception(exc)
    return future


def _view(root: np.ndarray, dtype, shape, offset: int, strides, kind=np.ndarray):
    view = np.ndarray(shape, dtype, buffer=root, offset=offset, strides=strides)
    return view if kind is np.ndarray else view.view(kind)


def _thread_pool(max_workers: int, prefix: str):
    return concurrent.futures.ThreadPoolExecutor(max_workers, thread_name_prefix=prefix)


def _event(is_set: bool):
    event = threading.Event()
    if is_set:
        event.set()
    return event


def _by_name(module: str, qualname: str):
    obj = sys.modules.get(module) or __import__(module, fromlist=["_"])
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


_LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def _numba_dispatcher_type():
    try:
        from numba.core.dispatcher import Dispatcher
    except ImportError:  # pragma: no cover - numba is a dependency
        return ()
    return (Dispatcher,)


class _Pickler(pickle.Pickler):
    """Pickles a simulator: externals by reference, background work drained (see the module)."""

    def __init__(self, file, externals: dict[str, object], buffer_callback=None):
        # protocol 4 for the file: a NumPy array then comes back owning its memory (protocol 5
        # rebuilds it on a buffer), so a view of it has it as its base, as in the live run;
        # protocol 5 for the drain pass, whose arrays go out of band, uncopied
        protocol = 5 if buffer_callback is not None else 4
        super().__init__(file, protocol=protocol, buffer_callback=buffer_callback)
        self._external_ids = {id(obj): name for name, obj in externals.items() if obj is not None}
        self._dispatchers = _numba_dispatcher_type()

    def persistent_id(self, obj):
        return self._external_ids.get(id(obj))

    def reducer_override(self, obj):
        if isinstance(obj, np.ndarray):
            # A view stays a view of the same base: a policy's state may hand the loop a view
            # of its own arrays (a field of per-LBA rows), and two copies would drift apart.
            # Its direct base when that can lend its buffer (so ``view.base`` is what it was),
            # else the first contiguous one below it.
            root = obj.base
            while isinstance(root, np.ndarray) and not root.flags.c_contiguous:
                root = root.base
            if not isinstance(root, np.ndarray) or type(obj) not in (np.ndarray, np.recarray):
                return NotImplemented
            offset = obj.__array_interface__["data"][0] - root.__array_interface__["data"][0]
            return _view, (root, obj.dtype, obj.shape, offset, obj.strides, type(obj))
        if isinstance(obj, concurrent.futures.Future):
            try:
                return _done_future, (obj.result(),)  # waits: the job's result is part of the state
            except Exception as exc:  # the job failed: the resumed run meets the same failure
                return _failed_future, (exc,)
        if isinstance(obj, concurrent.futures.ThreadPoolExecutor):
            if not obj._shutdown:
                obj.submit(int).result()  # every job queued before this one has run (FIFO)
            return _thread_pool, (obj._max_workers, obj._thread_name_prefix)
        if isinstance(obj, threading.Event):
            return _event, (obj.is_set(),)
        if isinstance(obj, _LOCK_TYPES):
            if isinstance(obj, _LOCK_TYPES[0]):
                if obj.locked():
                    raise CheckpointError(
                        "a lock was held at the checkpoint, so a background job was still running",
                        "report this as a bug of the policy's checkpoint support",
                    )
                return threading.Lock, ()
            return threading.RLock, ()
        if isinstance(obj, threading.Condition):
            return threading.Condition, ()
        if isinstance(obj, threading.Thread):
            raise CheckpointError(
                f"a running thread ({obj.name}) cannot be checkpointed",
                "give the policy a checkpoint_problem() naming the setting that starts it",
            )
        if self._dispatchers and isinstance(obj, self._dispatchers):
            fn = obj.py_func
            try:
                if _by_name(fn.__module__, fn.__qualname__) is obj:
                    return _by_name, (fn.__module__, fn.__qualname__)
            except (AttributeError, ImportError):
                pass
            raise CheckpointError(
                f"the Numba function {fn.__module__}.{fn.__qualname__} is not importable by its name",
                "keep compiled functions at module level or rebuild them in __setstate__",
            )
        return NotImplemented


class _Sink:
    def write(self, data) -> int:
        return memoryview(data).nbytes


def drain(obj, externals: dict[str, object] | None = None) -> None:
    """Wait for every background job reachable from ``obj`` (futures, thread pools' queues).

    A pass of the pickler into nothing, before the real one: a job still running could change
    objects the real pass has already written (a model's weights, a history entry), so all of
    them must be done before anything is written. Arrays are passed out of band, not copied."""
    _Pickler(_Sink(), externals or {}, buffer_callback=lambda buf: True).dump(obj)


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, externals: dict[str, object]):
        super().__init__(file)
        self._externals = externals

    def persistent_load(self, pid):
        if pid not in self._externals or self._externals[pid] is None:
            raise CheckpointError(f"the checkpoint refers to {pid!r}, which this job does not have", "remove it")
        obj = self._externals[pid]
        if callable(obj):  # built on demand (e.g. a timed run's write times)
            obj = self._externals[pid] = obj()
        return obj


# -- process-wide random states ---------------------------------------------------------------
def random_states(extra: dict | None = None) -> dict:
    """Python's, NumPy's legacy global and Numba's (this thread) RNG states, and those of
    ``extra`` (``{name: (get, set)}``, e.g. torch's from the pipeline: the simulator core imports
    no model library): a policy's own generators travel with it; these are the ones no object
    holds."""
    from numba import _helperlib

    out = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "numba": _helperlib.rnd_get_state(_helperlib.rnd_get_np_state_ptr()),
    }
    for name, (get, _) in (extra or {}).items():
        out[name] = get()
    return out


def restore_random_states(states: dict, extra: dict | None = None) -> None:
    from numba import _helperlib

    random.setstate(states["python"])
    np.random.set_state(states["numpy"])
    _helperlib.rnd_set_state(_helperlib.rnd_get_np_state_ptr(), states["numba"])
    for name, (_, set_state) in (extra or {}).items():
        if states.get(name) is not None:
            set_state(states[name])


# -- the checkpointer -------------------------------------------------------------------------
class Checkpointer:
    """Saves a simulation into ``directory`` at chunk boundaries and finds it again.

    ``identity``: ``{key: json text}`` of everything the run's outcome depends on (the trace's
    digest, the effective configuration, the code version); ``every_writes``: a checkpoint at the
    first chunk boundary past each multiple of that many trace writes; ``every_minutes``: at the
    first one after that much wall time since the last (0: at every boundary); ``externals``:
    objects stored by name (the trace, the write stream), which the resumed job supplies;
    ``random_extra``: further process-wide random states (:func:`random_states`)."""

    def __init__(
        self,
        directory,
        identity: dict[str, str],
        *,
        every_writes: int | None = None,
        every_minutes: float | None = None,
        externals: dict[str, object] | None = None,
        random_extra: dict | None = None,
    ):
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        self.identity = dict(identity)
        self.every_writes = every_writes
        self.every_minutes = every_minutes
        self.externals = dict(externals or {})
        self.random_extra = dict(random_extra or {})
        self.saved = 0  # checkpoints written by this process
        self.save_seconds: list[float] = []
        self.last_bytes = 0
        self._last_position = 0
        self._last_time = time.monotonic()
        self._requested = None  # a preemption signal waiting for the next boundary

    # reading
    def header(self) -> dict | None:
        """The checkpoint's header, None if there is none."""
        try:
            with open(self.path, "rb") as f:
                head = f.read(16)
                if len(head) < 16 or head[:8] != MAGIC:
                    raise CheckpointError(
                        f"{self.path} is not a dogi_ml checkpoint (or an unfinished one)",
                        "remove it or choose another sim.checkpoint_dir",
                    )
                (n,) = struct.unpack("<Q", head[8:])
                return json.loads(f.read(n))
        except FileNotFoundError:
            return None

    def check(self, header: dict) -> None:
        """Refuse a checkpoint of another job: the first key whose value differs, and the fix."""
        theirs = header["identity"]
        for key in sorted(set(theirs) | set(self.identity)):
            if theirs.get(key) != self.identity.get(key):
                raise CheckpointError(
                    f"{self.path} was saved by another run: {key} is {theirs.get(key, 'unset')} there, "
                    f"{self.identity.get(key, 'unset')} here",
                    f"rerun with the checkpoint's {key}, or remove {self.path} (or choose another "
                    "sim.checkpoint_dir) to start over",
                )

    def load(self):
        """``(simulator, position)`` from the checkpoint, None if there is none; the process-wide
        random states are restored. A checkpoint of another job is refused (:meth:`check`)."""
        header = self.header()
        if header is None:
            return None
        self.check(header)
        with open(self.path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(16)[8:])
            f.seek(16 + n)  # past the header: the pickle
            payload = _Unpickler(f, self.externals).load()
        restore_random_states(payload["random"], self.random_extra)
        self._last_position = int(header["position"])
        return payload["simulator"], int(header["position"])

    # writing
    def due(self, position: int) -> bool:
        if self._requested is not None:
            return True
        if self.every_writes and position // self.every_writes > self._last_position // self.every_writes:
            return True
        if self.every_minutes is not None and time.monotonic() - self._last_time >= 60.0 * self.every_minutes:
            return True
        return False

    def after_chunk(self, sim, position: int) -> None:
        """``Simulator.feed``'s ``after_chunk`` (``position``: trace writes applied so far)."""
        if self.due(position):
            self.save(sim, position)
        if self._requested is not None:
            handler, signum, frame = self._requested
            self._requested = None
            handler(signum, frame)  # e.g. submitit's: requeue this job and exit

    def save(self, sim, position: int) -> Path:
        """Write the checkpoint atomically: a temporary file, fsync, rename, fsync the directory."""
        t0 = time.perf_counter()
        self.directory.mkdir(parents=True, exist_ok=True)
        drain(sim, self.externals)  # every background job done before anything is written
        payload = {"simulator": sim, "random": random_states(self.random_extra)}
        header = json.dumps({"identity": self.identity, "position": int(position), "saved_unix": time.time()})
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(MAGIC + struct.pack("<Q", len(header.encode())) + header.encode())
                _Pickler(f, self.externals).dump(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)  # the last complete checkpoint stays
            raise
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename itself survives a crash
        finally:
            os.close(fd)
        self._last_position = int(position)
        self._last_time = time.monotonic()
        self.saved += 1
        self.last_bytes = self.path.stat().st_size
        self.save_seconds.append(time.perf_counter() - t0)
        return self.path

    def remove(self) -> None:
        """Delete the checkpoint (a finished run needs it no more), and its directory if empty."""
        self.path.unlink(missing_ok=True)
        try:
            self.directory.rmdir()
        except OSError:  # not empty (the user's files), or already gone
            pass

    # preemption
    def defer_signal(self, signum: int):
        """Route ``signum`` through the next chunk boundary: the handler installed for it now
        (e.g. submitit's requeue on preemption) runs there, right after a checkpoint. Returns a
        function that puts the old handler back."""
        import signal

        previous = signal.getsignal(signum)
        if not callable(previous):
            return lambda: None

        def request(sig, frame):
            self._requested = (previous, sig, frame)

        try:
            signal.signal(signum, request)
        except ValueError:  # not the main thread: the handler stays as it was
            return lambda: None
        return lambda: signal.signal(signum, previous)
