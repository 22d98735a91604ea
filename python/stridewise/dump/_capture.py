"""``stridewise.dump``: record the inputs and outputs of ATen ops, forward and backward.

Uses a TorchDispatchMode, which sees every ATen op that reaches the dispatcher, including the
ops that autograd runs during ``.backward()`` while the mode is active.  An op runs in the
backward pass when ``torch._C._current_graph_task_id() != -1``.
"""
from __future__ import annotations

import fnmatch
import os
import shutil
import socket
import sys
import threading
import time

from ._reads import unread_arguments, written_arguments
from ._writer import IndexWriter, ShardWriter

FORMAT_VERSION = 1

_ST_CODES = None


def _st_codes():
    global _ST_CODES
    if _ST_CODES is None:
        import torch
        codes = {
            torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
            torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
            torch.bool: "BOOL",
        }
        for name, code in (("uint16", "U16"), ("uint32", "U32"), ("uint64", "U64"),
                           ("float8_e4m3fn", "F8_E4M3"), ("float8_e5m2", "F8_E5M2")):
            if hasattr(torch, name):
                codes[getattr(torch, name)] = code
        _ST_CODES = codes
    return _ST_CODES


def resolve_rank():
    """(rank, source): torch.distributed when initialized, else $RANK, else 0."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), "torch.distributed"
    except Exception:  # noqa: BLE001 - a broken distributed setup must not stop a dump
        pass
    env = os.environ.get("RANK")
    if env is not None and env.strip().lstrip("-").isdigit():
        return int(env), "env RANK"
    return 0, "default"


def _op_names(func):
    schema = func._schema.name  # "aten::gather"
    overload = func._overloadname  # "default"
    bare = schema.split("::", 1)[-1]
    return schema, overload, (schema, bare, f"{schema}.{overload}", f"{bare}.{overload}")


def _normalize_patterns(ops):
    if ops is None:
        return None
    if isinstance(ops, str):
        ops = [p for p in ops.split(",") if p.strip()]
    out = []
    for p in ops:
        if not isinstance(p, str):  # torch.ops.aten.gather or torch.ops.aten.gather.default
            schema = getattr(p, "_schema", None)
            p = schema.name if schema is not None else getattr(p, "_qualified_op_name", str(p))
        out.append(p.strip())
    return out


def _matches(patterns, names):
    return any(fnmatch.fnmatchcase(n, p) for p in patterns for n in names)


def _named_tensors(items, torch):
    """[(name, tensor, i)] for tensors in (name, value) pairs, looking one level into lists; i is
    the index of the pair (so the schema argument or return of a list element is known)."""
    out = []
    for i, (name, v) in enumerate(items):
        if isinstance(v, torch.Tensor):
            out.append((name, v, i))
        elif isinstance(v, (list, tuple)):
            for j, x in enumerate(v):
                if isinstance(x, torch.Tensor):
                    out.append((f"{name}[{j}]", x, i))
    return out


def _is_control_op(schema_name):
    """stridewise's own control ops (stridewise::_enable, _disable, _enabled, _stats, ...), seen
    when stridewise.use() runs inside the dump: not model ops, so neither recorded nor counted in
    seq (a routed run then has the same op sequence as a native one)."""
    return schema_name.startswith("stridewise::_")


_ALIASES = {}


def _aliases(func):
    """(unread argument names, written argument names, per-return alias kind) of an OpOverload,
    cached. Return kinds: "new" (no alias annotation: a fresh tensor), "written" (aliases an
    argument the op writes, ``Tensor(a!)``), "view" (aliases without writing, ``Tensor(a)``)."""
    got = _ALIASES.get(func)
    if got is None:
        rets = []
        for r in func._schema.returns:
            info = r.alias_info
            rets.append("new" if info is None else "written" if info.is_write else "view")
        got = (unread_arguments(func), written_arguments(func), tuple(rets))
        _ALIASES[func] = got
    return got


def _addr(t, has_data):
    """([lo, hi], storage base or None): the half-open absolute byte range the view spans, lo =
    data_ptr, hi = lo + (1 + sum((size_i - 1) * stride_i)) * element_size, hi = lo when numel is
    0. A tensor without data (meta, fake, sparse) spans nothing: [0, 0] and no storage, so a
    reader matching byte ranges links it to nothing."""
    if not has_data:
        return [0, 0], None
    lo = int(t.data_ptr())
    storage = int(t.untyped_storage().data_ptr())
    if t.numel() == 0:
        return [lo, lo], storage or None
    span = 1 + sum((int(n) - 1) * int(s) for n, s in zip(t.shape, t.stride()))
    return [lo, lo + span * t.element_size()], storage or None


def _short_repr(v, limit=120):
    try:
        s = repr(v)
    except Exception:  # noqa: BLE001
        s = f"<{type(v).__name__}>"
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _no_data_reason(t, torch):
    """Why tensor t has no data to store or address (meta, fake, non-strided), else None."""
    try:
        from torch._subclasses.fake_tensor import is_fake
    except ImportError:  # pragma: no cover - older torch
        def is_fake(_):
            return False
    if t.device.type == "meta" or is_fake(t):
        return "meta or fake tensor: no data"
    if t.layout != torch.strided:
        return f"layout {t.layout} is not stored"
    return None


class dump:  # noqa: N801 - used like a function: `with stridewise.dump(dir):`
    """Context manager that records ATen op inputs and outputs to ``DIR/step{N}/rank{R}/``.

    Args:
      dir: dump root directory (created if missing).
      ops: None for every op, or op names / glob patterns ("gather", "aten::index_*",
        "aten::scatter.src") or op objects (torch.ops.aten.gather); a comma-separated string works.
      exclude: patterns of ops not to record.
      step: step number of the records (``set_step`` / ``next_step`` change it).
      rank: override the rank (default: torch.distributed, then $RANK, then 0).
      inputs, outputs: record inputs / outputs.
      shard_bytes: maximum data bytes per safetensors shard (a bigger tensor gets its own shard).
      fsync: "record" (fsync index and shard after every tensor: survives power loss),
        "shard" (default: fsync when a shard or the dump is closed; a killed process loses
        nothing already recorded, since every record is written with one write call), "never".
      overwrite: replace an existing DIR/step{N}/rank{R}; otherwise an existing one is an error.

    The object has ``stats`` (tensors, bytes, ops recorded) and ``rank_dir`` (current directory).
    """

    def __init__(self, dir, ops=None, step=0, *, exclude=None, rank=None, inputs=True, outputs=True,
                 shard_bytes=1 << 30, fsync="shard", overwrite=False, header_reserve=256 << 10):
        self.root = os.fspath(dir)
        self.patterns = _normalize_patterns(ops)
        self.exclude = _normalize_patterns(exclude) or []
        self.step = int(step)
        if rank is None:
            self.rank, self.rank_source = resolve_rank()
        else:
            self.rank, self.rank_source = int(rank), "argument"
        self.inputs, self.outputs = bool(inputs), bool(outputs)
        self.shard_bytes, self.fsync, self.overwrite = int(shard_bytes), fsync, overwrite
        self.header_reserve = int(header_reserve)
        self.stats = {"ops": 0, "tensors": 0, "bytes": 0, "skipped": 0, "unread": 0}
        self.rank_dir = None
        self._lock = threading.RLock()
        self._mode = None
        self._shards = self._index = None
        self._seq = 0
        self._calls = {}
        self._written = {"ops": 0, "tensors": 0}  # records in the open step directory
        self._writer_opts = {}
        self._has_graph_task_id = None

    # -- directories -------------------------------------------------------------------------
    def _open_step(self):
        self.rank_dir = os.path.join(self.root, f"step{self.step}", f"rank{self.rank}")
        if os.path.exists(self.rank_dir):
            if not self.overwrite:
                raise FileExistsError(
                    f"{self.rank_dir}: a dump for step {self.step} rank {self.rank} already exists "
                    "(pass overwrite=True / --overwrite, or choose another directory or step)")
            shutil.rmtree(self.rank_dir)
        os.makedirs(self.rank_dir)
        self._shards = ShardWriter(self.rank_dir, self.shard_bytes, self.header_reserve, self.fsync,
                                   **self._writer_opts)
        self._index = IndexWriter(os.path.join(self.rank_dir, "index.jsonl"), self.fsync)
        self._seq = 0
        self._calls = {}
        self._written = {"ops": 0, "tensors": 0}
        import torch
        self._index.write({
            "kind": "meta", "v": FORMAT_VERSION, "step": self.step, "rank": self.rank,
            "rank_source": self.rank_source, "torch": torch.__version__, "python": sys.version.split()[0],
            "host": socket.gethostname(), "pid": os.getpid(), "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "ops": self.patterns, "exclude": self.exclude, "fsync": self.fsync,
            "end_record": True,  # promise: a directory closed cleanly ends with an "end" record
        })

    def _close_step(self):
        """Writes the "end" record (counts of what this step directory holds; a reader that finds
        meta's end_record promise and no end record knows the run was cut short), then closes."""
        if self._index is not None:
            self._index.write({"kind": "end", "step": self.step, "rank": self.rank, **self._written})
        for w in (self._index, self._shards):
            if w is not None:
                w.close()
        self._index = self._shards = None

    def set_step(self, step):
        """Closes the current step directory and starts recording into step{step}."""
        with self._lock:
            self._close_step()
            self.step = int(step)
            self._open_step()

    def next_step(self):
        self.set_step(self.step + 1)

    # -- context manager ---------------------------------------------------------------------
    def __enter__(self):
        from torch.utils._python_dispatch import TorchDispatchMode
        import torch

        self._has_graph_task_id = hasattr(torch._C, "_current_graph_task_id")
        owner = self

        class _DumpMode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return owner._dispatch(func, args, kwargs or {})

        self._open_step()
        self._mode = _DumpMode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        try:
            if self._mode is not None:
                self._mode.__exit__(*exc)
        finally:
            self._mode = None
            with self._lock:
                self._close_step()
        return False

    # -- capture -----------------------------------------------------------------------------
    def _phase(self, torch):
        if self._has_graph_task_id and torch._C._current_graph_task_id() != -1:
            return "backward"
        return "forward"

    def _dispatch(self, func, args, kwargs):
        import torch

        schema, overload, names = _op_names(func)
        if _is_control_op(schema):
            return func(*args, **kwargs)
        wanted = (self.patterns is None or _matches(self.patterns, names)) and not (
            self.exclude and _matches(self.exclude, names))
        if not wanted:
            with self._lock:
                self._seq += 1
            return func(*args, **kwargs)
        phase = self._phase(torch)
        unread, written, ret_kinds = _aliases(func)
        with self._lock:
            seq = self._seq
            self._seq += 1
            key = (schema, phase)
            call = self._calls.get(key, 0)
            self._calls[key] = call + 1
            base = {"step": self.step, "rank": self.rank, "seq": seq, "op": schema, "overload": overload,
                    "call": call, "phase": phase}
            sargs = func._schema.arguments
            named = [(sargs[i].name if i < len(sargs) else f"arg{i}", a) for i, a in enumerate(args)]
            named += list(kwargs.items())
            tensors_in = _named_tensors(named, torch) if self.inputs else []
            # The op record and its input records are written under one lock hold: "inputs"
            # counts the tensor records that follow it directly.
            self._write_index({"kind": "op", **base, "inputs": len(tensors_in),
                               "args": {n: _short_repr(v) for n, v in named if not isinstance(v, torch.Tensor)
                                        and not (isinstance(v, (list, tuple)) and any(
                                            isinstance(x, torch.Tensor) for x in v))}}, "ops")
            self.stats["ops"] += 1
            for pos, (name, t, i) in enumerate(tensors_in):  # snapshot before an in-place op runs
                arg = named[i][0]
                self._record(base, "input", pos, name, t, torch, alias="written" if arg in written else None,
                             read=arg not in unread)
        out = func(*args, **kwargs)
        if self.outputs:
            rets = func._schema.returns
            items = out if isinstance(out, (tuple, list)) and len(rets) != 1 else (out,)
            named_out = [((rets[i].name if i < len(rets) and rets[i].name else f"out{i}"), v)
                         for i, v in enumerate(items)]
            with self._lock:
                for pos, (name, t, i) in enumerate(_named_tensors(named_out, torch)):
                    self._record(base, "output", pos, name, t, torch,
                                 alias=ret_kinds[i] if i < len(ret_kinds) else "new")
        return out

    def _write_index(self, rec, counter):
        self._index.write(rec)
        self._written[counter] += 1

    def _record(self, base, io, pos, name, t, torch, alias=None, read=True):
        """Writes one tensor record. read=False: the op does not read this input's values
        (_reads.unread_arguments); the record says so and no bytes are stored."""
        rec = {"kind": "tensor", "v": FORMAT_VERSION, **base, "io": io, "pos": pos, "arg": name,
               "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape)}
        try:
            rec["strides"] = list(t.stride())
            rec["storage_offset"] = int(t.storage_offset())
        except Exception:  # noqa: BLE001 - sparse and other layouts have no strides
            rec["strides"] = None
        rec["device"] = str(t.device)
        rec["requires_grad"] = bool(t.requires_grad)
        try:  # one check serves the address and the store
            no_data = _no_data_reason(t, torch)
        except Exception as e:  # noqa: BLE001 - never break the model run because of the dump
            no_data = f"capture failed: {type(e).__name__}: {e}"
        try:
            rec["addr"], storage = _addr(t, no_data is None)
        except Exception:  # noqa: BLE001 - a subclass without data_ptr: no address, never an error
            rec["addr"], storage = [0, 0], None
        if storage is not None:
            rec["storage"] = storage
        if alias is not None:
            rec["alias"] = alias
        if not read:
            rec.update(read=False, file=None, key=None)
            self.stats["unread"] += 1
        else:
            try:
                self._store(rec, t, torch, no_data)
            except Exception as e:  # noqa: BLE001 - never break the model run because of the dump
                rec.update(file=None, key=None, skipped=f"capture failed: {type(e).__name__}: {e}")
            if rec.get("skipped"):
                self.stats["skipped"] += 1
        self._write_index(rec, "tensors")

    def _store(self, rec, t, torch, no_data):
        """Stores t's bytes, or records why not; no_data is _no_data_reason(t)."""
        reason = no_data
        if reason is None and t.is_quantized:
            reason = "quantized tensor is not stored"
        if reason is None:
            data = t.detach()
            if data.is_complex():
                data = torch.view_as_real(data.resolve_conj())
                rec["stored_as"] = "view_as_real"
            code = _st_codes().get(data.dtype)
            if code is None:
                reason = f"dtype {data.dtype} is not stored"
        if reason is not None:
            rec.update(file=None, key=None, skipped=reason)
            return
        # Copy to CPU and make contiguous; a CPU tensor that already is contiguous is written
        # straight from its memory, before the op (or any later op) can change it.
        if data.device.type != "cpu":
            data = data.to("cpu")
        data = data.resolve_neg().contiguous()
        buf = data.reshape(-1).view(torch.uint8).numpy()
        key = f"{rec['seq']}.{rec['phase'][0]}.{rec['op']}.{rec['call']}.{rec['io'][0]}{rec['pos']}"
        fname, offset, nbytes = self._shards.append(key, code, list(data.shape), buf)
        rec.update(file=fname, key=key, st_dtype=code, offset=offset, nbytes=nbytes)
        self.stats["tensors"] += 1
        self.stats["bytes"] += nbytes
