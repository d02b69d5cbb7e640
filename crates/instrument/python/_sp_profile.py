"""system-profile's runtime helper, installed by `instrument_file` and listed in
profile_output/ledger.json; `revert_changes` removes it with the code that calls it.

Measurements go to one JSONL log (profile_output/instrument/measure.jsonl, or $SP_PROFILE_LOG),
one record per line, described by schemas/instrument_record.json. A process started by a
profiler run (`SP_RUN_ID` in its environment, inherited by its children) names that run in
every record, so a report can tell the runs apart. Records are buffered and
appended with one write per batch (O_APPEND), so processes that share the log never split a
line. Unsampled calls cost a counter and a comparison; only sampled calls measure.
"""
import atexit, functools, inspect, json, os, random, sys, threading, time

HELPER_VERSION = 2
_LOG = os.environ.get("SP_PROFILE_LOG") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "measure.jsonl")
_RUN = os.environ.get("SP_RUN_ID") or None
_RUN_JSON = ',"run":%s' % json.dumps(_RUN) if _RUN else ""
_FLUSH_RECORDS = 512
_FLUSH_SECONDS = 1.0
_pid = os.getpid()
_buf = []
_lock = threading.Lock()
_last_flush = time.monotonic()
_sites = {}
_notes = set()
_meta_written = False
_local = threading.local()
_perf = time.perf_counter
_cpu = time.process_time
_perf_ns = time.perf_counter_ns
_cpu_ns = time.process_time_ns
_now_ns = time.time_ns
_monotonic = time.monotonic
_modules = sys.modules


def _statm_rss():
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


# Before the program's own imports when the runner loads this, or when its import is the
# file's first line: the interpreter's share of the memory.
_RSS_AT_LOAD = _statm_rss()
_LOAD_PID = os.getpid()


_rank_known = None


def _rank():
    """torch.distributed's rank once a process group exists (cached: it does not change)."""
    global _rank_known
    if _rank_known is not None:
        return _rank_known
    d = _modules.get("torch.distributed")
    try:
        if d is not None and d.is_available() and d.is_initialized():
            _rank_known = d.get_rank()
    except Exception:
        pass
    return _rank_known


def _emit(rec):
    """Buffer a record: a dict, or for timing (the hot one) a tuple formatted at flush."""
    if not _meta_written:
        _write_meta()
    _buf.append(rec)
    if len(_buf) >= _FLUSH_RECORDS or _monotonic() - _last_flush > _FLUSH_SECONDS:
        _flush()


# Integers (ns) written as decimal seconds: formatting a float costs several times more.
_TIMING = ('{"kind":"timing","t":%d.%06d,"pid":%d,"change":%s,"site":%s,"call":%d,'
           '"wall_s":%d.%09d,"cpu_s":%d.%09d%s%s}\n')


def _line(r):
    if type(r) is tuple:
        site, call, t_ns, wall_ns, cpu_ns, rank = r
        t_s, t_us = divmod(t_ns // 1000, 1000000)
        w_s, w_ns = divmod(wall_ns, 1000000000)
        c_s, c_ns = divmod(max(cpu_ns, 0), 1000000000)
        return _TIMING % (t_s, t_us, _pid, site.change_json, site.name_json, call,
                          w_s, w_ns, c_s, c_ns, "" if rank is None else ',"rank":%d' % rank,
                          _RUN_JSON)
    if _RUN:
        r["run"] = _RUN
    return json.dumps(r, separators=(",", ":")) + "\n"


def _flush():
    global _last_flush
    with _lock:
        if not _buf:
            return
        lines = "".join(_line(r) for r in _buf)
        del _buf[:]
        _last_flush = _monotonic()
    data = lines.encode()
    try:
        fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        os.makedirs(os.path.dirname(_LOG), exist_ok=True)
        fd = os.open(_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        while data:
            data = data[os.write(fd, data):]
    finally:
        os.close(fd)


def _write_meta():
    global _meta_written
    _meta_written = True
    torch = sys.modules.get("torch")
    devices = 0
    try:
        if torch is not None and torch.cuda.is_available():
            devices = torch.cuda.device_count()
    except Exception:
        pass
    rec = {"kind": "meta", "t": time.time(), "pid": _pid, "argv": list(sys.argv),
           "python": sys.version.split()[0], "helper_version": HELPER_VERSION,
           "cuda_devices": devices}
    if _RSS_AT_LOAD and _pid == _LOAD_PID:
        rec["rss_bytes"] = _RSS_AT_LOAD
    if torch is not None:
        rec["torch"] = str(getattr(torch, "__version__", "?"))
    _buf.append(rec)


def _note(change, message):
    if (change, message) in _notes:
        return
    _notes.add((change, message))
    rec = {"kind": "note", "t": time.time(), "pid": _pid, "message": message}
    if change:
        rec["change"] = change
    _emit(rec)


def _base(site, call, kind):
    rec = {"kind": kind, "t": time.time(), "pid": _pid, "change": site.change,
           "site": site.name, "call": call}
    r = _rank()
    if r is not None:
        rec["rank"] = r
    return rec


def _after_fork():
    global _pid, _buf, _last_flush, _meta_written
    _pid = os.getpid()
    _buf = []
    _last_flush = time.monotonic()
    _meta_written = False
    for s in _sites.values():
        s.reset()
    # multiprocessing ends its children with os._exit, which skips atexit; its exit hook runs
    # finalizers, but only those registered after it clears them, from an after-forker.
    mp_util = sys.modules.get("multiprocessing.util")
    if mp_util is not None and _sites:
        mp_util.register_after_fork(_MP_HOOK, _mp_finalizer)


class _MpHook:
    """What multiprocessing's after-fork registry holds a weak reference to."""


_MP_HOOK = _MpHook()


def _mp_finalizer(_hook):
    sys.modules["multiprocessing.util"].Finalize(None, _at_exit, exitpriority=-100)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class _Site:
    """One place measured: a function or a block, with its sampling."""

    __slots__ = ("change", "name", "measure", "every", "rate", "calls", "sampled", "probe",
                 "counters", "offset", "change_json", "name_json")

    def __init__(self, change, name, measure, every, rate):
        self.change, self.name, self.measure = change, name, measure
        self.change_json, self.name_json = json.dumps(change), json.dumps(name)
        self.every = max(1, int(every or 1))
        self.rate = 1.0 if rate is None else float(rate)
        self.calls = 0
        self.sampled = 0
        self.probe = _PROBES[measure](self)
        # Fast wrappers count in their own closure; these read those counts.
        self.counters = []
        self.offset = 0

    def total_calls(self):
        return self.calls + sum(c() for c in self.counters) - self.offset

    def reset(self):
        # A forked child starts counting from zero; closure counts cannot be reset, so the
        # parent's are subtracted.
        self.offset += self.total_calls()
        self.sampled = 0

    def take(self):
        """The call's 1-based index when this call is sampled, else 0."""
        self.calls += 1
        n = self.calls
        if self.every > 1 and (n - 1) % self.every:
            return 0
        if self.rate < 1.0 and random.random() >= self.rate:
            return 0
        self.sampled += 1
        return n


def _site(change, name, measure, every, rate):
    key = (change, name)
    s = _sites.get(key)
    if s is None:
        if not _sites:
            atexit.register(_at_exit)
        s = _sites[key] = _Site(change, name, measure, every, rate)
    return s


def _at_exit():
    for s in list(_sites.values()):
        try:
            s.probe.finish()
        except Exception as e:
            _note(s.change, "%s: %s" % (type(e).__name__, e))
        rec = {"kind": "summary", "t": time.time(), "pid": _pid, "change": s.change,
               "site": s.name, "measure": s.measure, "calls": s.total_calls(), "sampled": s.sampled}
        r = _rank()
        if r is not None:
            rec["rank"] = r
        _buf.append(rec)
    _flush()


# --- probes: what a sampled call measures --------------------------------------------------

class _Timing:
    def __init__(self, site):
        self.site = site

    def start(self, call):
        return (_perf_ns(), _cpu_ns())

    def stop(self, call, state):
        wall, cpu = _perf_ns() - state[0], _cpu_ns() - state[1]
        _emit((self.site, call, _now_ns(), wall, cpu, _rank_known if _rank_known is not None else _rank()))

    def finish(self):
        pass


def _torch_cuda():
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_available():
            return torch
    except Exception:
        pass
    return None


class _CudaEvents(_Timing):
    """Events on the current stream around each sampled call; read when they are done (checked
    every 64 calls without waiting) and at exit (one synchronize), never a sync per call."""

    def __init__(self, site):
        super().__init__(site)
        self.pending = []

    def start(self, call):
        torch = _torch_cuda()
        if torch is None:
            _note(self.site.change, "CUDA is not available: %s measured wall time instead of CUDA events" % self.site.name)
            return ("wall", _Timing.start(self, call))
        ev = torch.cuda.Event(enable_timing=True)
        ev.record()
        return ("cuda", ev, torch.cuda.current_device())

    def stop(self, call, state):
        if state[0] == "wall":
            return _Timing.stop(self, call, state[1])
        torch = sys.modules["torch"]
        end = torch.cuda.Event(enable_timing=True)
        end.record()
        self.pending.append((call, state[1], end, state[2], time.time()))
        if len(self.pending) >= 64:
            self.resolve(wait=False)

    def resolve(self, wait):
        keep = []
        for call, s, e, dev, t in self.pending:
            if wait:
                e.synchronize()
            elif not e.query():
                keep.append((call, s, e, dev, t))
                continue
            rec = _base(self.site, call, "cuda_time")
            rec["t"] = t
            rec["gpu_s"] = s.elapsed_time(e) / 1000.0
            rec["device"] = dev
            _emit(rec)
        self.pending = keep

    def finish(self):
        if self.pending:
            self.resolve(wait=True)


def _device_memory():
    torch = sys.modules.get("torch")
    out = []
    try:
        # Only a process that already uses CUDA is asked: asking would create a context.
        if torch is not None and torch.cuda.is_initialized():
            for d in range(torch.cuda.device_count()):
                out.append({"device": d,
                            "allocated_bytes": int(torch.cuda.memory_allocated(d)),
                            "reserved_bytes": int(torch.cuda.memory_reserved(d)),
                            "peak_allocated_bytes": int(torch.cuda.max_memory_allocated(d))})
    except Exception:
        pass
    return out


class _Memory(_Timing):
    def mark(self, call, point):
        rec = _base(self.site, call, "memory")
        rec["point"] = point
        rec["rss_bytes"] = _statm_rss()
        rec["devices"] = _device_memory()
        _emit(rec)

    def start(self, call):
        self.mark(call, "enter")

    def stop(self, call, state):
        self.mark(call, "exit")


def _stack(name):
    s = getattr(_local, name, None)
    if s is None:
        s = []
        setattr(_local, name, s)
    return s


def _direction(src, dst):
    if src == dst:
        return "d2d" if src == "cuda" else None
    if src == "cpu" and dst == "cuda":
        return "h2d"
    if src == "cuda" and dst == "cpu":
        return "d2h"
    return None


class _Transfers(_Timing):
    """Copies made through Tensor.to / .cuda / .cpu / .copy_ while a sampled call runs."""

    def __init__(self, site):
        super().__init__(site)
        _patch_tensor()

    def start(self, call):
        acc = {}
        _stack("transfers").append(acc)
        return acc

    def stop(self, call, acc):
        stack = _stack("transfers")
        if stack and stack[-1] is acc:
            stack.pop()
        torch = _torch_cuda()
        for direction, a in sorted(acc.items()):
            time_s = a["wall_s"]
            if a["events"] and torch is not None:
                time_s = 0.0
                for s, e in a["events"]:
                    e.synchronize()
                    time_s += s.elapsed_time(e) / 1000.0
            rec = _base(self.site, call, "transfer")
            rec.update({"direction": direction, "count": a["count"], "bytes": a["bytes"],
                        "pinned_count": a["pinned"], "time_s": time_s,
                        "bandwidth_gbps": a["bytes"] / time_s / 1e9 if time_s > 0 else 0.0})
            _emit(rec)


_patched = False


def _record_copy(src, out, call):
    """Run `call` (the real copy), and count it when it crossed a device boundary."""
    stack = getattr(_local, "transfers", None)
    if not stack:
        return call()
    src_type = src.device.type
    torch = sys.modules["torch"]
    cuda = src_type == "cuda" or (out is not None and out.device.type == "cuda")
    start = end = None
    if cuda:
        start = torch.cuda.Event(enable_timing=True)
        start.record()
    t0 = _perf()
    result = call()
    wall = _perf() - t0
    if cuda:
        end = torch.cuda.Event(enable_timing=True)
        end.record()
    dst = out if out is not None else result
    if dst is src or not isinstance(dst, torch.Tensor):
        return result
    direction = _direction(src_type, dst.device.type)
    if direction is None:
        return result
    acc = stack[-1]
    a = acc.get(direction)
    if a is None:
        a = acc[direction] = {"count": 0, "bytes": 0, "pinned": 0, "wall_s": 0.0, "events": []}
    a["count"] += 1
    a["bytes"] += dst.numel() * dst.element_size()
    host = src if direction == "h2d" else dst
    try:
        if direction != "d2d" and host.is_pinned():
            a["pinned"] += 1
    except Exception:
        pass
    a["wall_s"] += wall
    if start is not None:
        a["events"].append((start, end))
    return result


def _patch_tensor():
    global _patched
    if _patched:
        return
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except Exception:
            _note(None, "torch is not importable: transfers are not tracked")
            return
    _patched = True
    T = torch.Tensor
    orig_to, orig_cuda, orig_cpu, orig_copy = T.to, T.cuda, T.cpu, T.copy_

    @functools.wraps(orig_to)
    def to(self, *a, **k):
        return _record_copy(self, None, lambda: orig_to(self, *a, **k))

    @functools.wraps(orig_cuda)
    def cuda(self, *a, **k):
        return _record_copy(self, None, lambda: orig_cuda(self, *a, **k))

    @functools.wraps(orig_cpu)
    def cpu(self, *a, **k):
        return _record_copy(self, None, lambda: orig_cpu(self, *a, **k))

    @functools.wraps(orig_copy)
    def copy_(self, src, *a, **k):
        if not getattr(_local, "transfers", None) or not isinstance(src, T):
            return orig_copy(self, src, *a, **k)
        return _record_copy(src, self, lambda: orig_copy(self, src, *a, **k))

    T.to, T.cuda, T.cpu, T.copy_ = to, cuda, cpu, copy_


class _Duplicates(_Timing):
    """At the end of a sampled call: tensors alive whose data is held twice. Same shape, dtype
    and content hash of up to 64 evenly spaced elements; one storage counted once (views are
    not copies). Reported: copies across the CPU and a GPU, and same-device copies of 1 MiB or
    more whose sampled elements are not all equal (a zero buffer is not a copy)."""

    def start(self, call):
        return None

    def stop(self, call, state):
        import gc
        torch = sys.modules.get("torch")
        if torch is None:
            _note(self.site.change, "torch is not imported: no tensors to compare")
            return
        import warnings
        with warnings.catch_warnings():
            # isinstance() on every live object wakes deprecated module attributes
            warnings.simplefilter("ignore")
            self.scan(call, torch, gc.get_objects())

    def scan(self, call, torch, objects):
        groups, seen, scanned = {}, set(), 0
        for obj in objects:
            if not isinstance(obj, torch.Tensor):
                continue
            try:
                if obj.is_sparse or obj.device.type == "meta" or obj.numel() == 0:
                    continue
                st = obj.untyped_storage()
                key = (str(obj.device), st.data_ptr(), obj.storage_offset(), tuple(obj.shape))
                if key in seen:
                    continue
                seen.add(key)
                scanned += 1
                flat = obj.detach().reshape(-1)
                n = flat.numel()
                step = max(1, n // 64)
                sample = flat[::step][:64]
                if sample.device.type != "cpu":
                    sample = sample.cpu()
                values = tuple(sample.tolist())
                ckey = (tuple(obj.shape), str(obj.dtype), hash(values))
                g = groups.setdefault(ckey, {"devices": [], "bytes": n * obj.element_size(),
                                             "constant": len(set(values)) <= 1})
                g["devices"].append(str(obj.device))
            except Exception:
                continue
        out, total = [], 0
        for (shape, dtype, _), g in groups.items():
            copies = len(g["devices"])
            if copies < 2:
                continue
            cross = any(d == "cpu" for d in g["devices"]) and any(d != "cpu" for d in g["devices"])
            if not cross and (g["bytes"] < (1 << 20) or g["constant"]):
                continue
            dup = (copies - 1) * g["bytes"]
            total += dup
            out.append({"shape": list(shape), "dtype": dtype.replace("torch.", ""),
                        "devices": sorted(g["devices"]), "copies": copies,
                        "bytes_each": g["bytes"], "bytes_duplicated": dup, "cross_device": cross})
        out.sort(key=lambda g: -g["bytes_duplicated"])
        rec = _base(self.site, call, "duplicates")
        rec.update({"tensors_scanned": scanned, "groups": out[:50], "bytes_duplicated": total})
        _emit(rec)


_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                "reduce_scatter_tensor", "broadcast", "reduce", "all_to_all", "all_to_all_single",
                "send", "recv", "isend", "irecv", "barrier", "gather", "scatter")
# nccl-tests' bus bandwidth factors, as a function of the world size n.
_BUS = {"all_reduce": lambda n: 2.0 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
        "all_gather_into_tensor": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
        "reduce_scatter_tensor": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
        "all_to_all_single": lambda n: (n - 1) / n}


def _tensor_bytes(x):
    torch = sys.modules["torch"]
    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    if isinstance(x, (list, tuple)):
        return sum(_tensor_bytes(t) for t in x)
    return 0


def _collective_bytes(op, args, kwargs):
    a = list(args)
    if op in ("all_gather",):
        return _tensor_bytes(a[0] if a else kwargs.get("tensor_list"))
    if op in ("all_gather_into_tensor",):
        return _tensor_bytes(a[0] if a else kwargs.get("output_tensor"))
    if op in ("reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single"):
        return _tensor_bytes(a[1] if len(a) > 1 else kwargs.get("input_list", kwargs.get("input")))
    if op == "barrier":
        return 0
    return _tensor_bytes(a[0] if a else kwargs.get("tensor"))


_dist_patched = False


def _patch_dist():
    global _dist_patched
    if _dist_patched:
        return True
    try:
        import torch.distributed as dist
    except Exception:
        return False
    if not dist.is_available():
        return False
    _dist_patched = True
    all_reduce = dist.all_reduce
    for op in _COLLECTIVES:
        orig = getattr(dist, op, None)
        if orig is None:
            continue
        setattr(dist, op, _collective_wrapper(dist, op, orig))
    _patch_ddp(dist, all_reduce)
    return True


# The site whose call runs now on any thread: DDP's reducer calls its communication hook from
# autograd's threads, where the calling thread's stack is not seen.
_nccl_running = []


def _patch_ddp(dist, all_reduce):
    """DDP's gradient all-reduces run in its C++ reducer and never call `dist.all_reduce`: a
    communication hook sees each bucket. It is registered at the first forward, and only if the
    program registered none of its own (a DDP model takes one hook, once)."""
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
    except Exception:
        return
    register = DDP.register_comm_hook
    for name in ("register_comm_hook", "_register_builtin_comm_hook"):
        orig = getattr(DDP, name, None)
        if orig is None:
            continue

        def theirs(self, *a, _orig=orig, **k):
            self._sp_hooked = True
            return _orig(self, *a, **k)
        setattr(DDP, name, theirs)
    forward = DDP.forward

    def forward_then_hook(self, *a, **k):
        if not getattr(self, "_sp_hooked", False):
            self._sp_hooked = True
            register(self, None, _bucket_hook(dist, all_reduce))
        return forward(self, *a, **k)
    DDP.forward = forward_then_hook


def _bucket_hook(dist, all_reduce):
    """What DDP's default hook does (average the bucket over the group), through the
    unwrapped `all_reduce` so the call is not counted twice."""
    def hook(state, bucket):
        site = _nccl_running[-1] if _nccl_running else None
        t0 = _perf()
        group = state if state is not None else dist.group.WORLD
        buf = bucket.buffer()
        buf.div_(group.size())
        fut = all_reduce(buf, group=group, async_op=True).get_future().then(lambda f: f.value()[0])
        if site is None:
            return fut
        nbytes = buf.numel() * buf.element_size()

        def done(f):
            # Host time from the bucket's launch to its future's completion.
            latency = _perf() - t0
            n = dist.get_world_size()
            alg = nbytes / latency / 1e9 if latency > 0 else 0.0
            _emit({"kind": "collective", "t": time.time(), "pid": _pid, "change": site.change,
                   "site": site.name, "op": "all_reduce", "backend": str(dist.get_backend()),
                   "bytes": nbytes, "world_size": n, "rank": dist.get_rank(), "async_op": True,
                   "latency_s": latency, "algbw_gbps": alg,
                   "busbw_gbps": alg * _BUS["all_reduce"](n) if n > 0 else 0.0,
                   "ddp_bucket": bucket.index()})
            return f.value()
        return fut.then(done)
    return hook


def _collective_wrapper(dist, op, orig):
    @functools.wraps(orig)
    def wrapper(*args, **kwargs):
        stack = getattr(_local, "nccl", None)
        if not stack:
            return orig(*args, **kwargs)
        site = stack[-1]
        group = kwargs.get("group")
        backend = str(dist.get_backend(group))
        torch = _torch_cuda() if backend == "nccl" else None
        start = None
        if torch is not None:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
        t0 = _perf()
        result = orig(*args, **kwargs)
        host = _perf() - t0
        latency = host
        if start is not None and not kwargs.get("async_op"):
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            end.synchronize()
            latency = start.elapsed_time(end) / 1000.0
        n = dist.get_world_size(group)
        nbytes = _collective_bytes(op, args, kwargs)
        alg = nbytes / latency / 1e9 if latency > 0 else 0.0
        rec = {"kind": "collective", "t": time.time(), "pid": _pid, "change": site.change,
               "site": site.name, "op": op, "backend": backend, "bytes": nbytes,
               "world_size": n, "rank": dist.get_rank(group) if group is not None else dist.get_rank(),
               "async_op": bool(kwargs.get("async_op", op in ("isend", "irecv"))),
               "latency_s": latency, "algbw_gbps": alg,
               "busbw_gbps": alg * _BUS.get(op, lambda n: 1.0)(n) if n > 0 else 0.0}
        _emit(rec)
        return result
    return wrapper


class _Nccl(_Timing):
    """torch.distributed calls made while a sampled call runs."""

    def __init__(self, site):
        super().__init__(site)
        if not _patch_dist():
            _note(site.change, "torch.distributed is not available: collectives are not tracked")

    def start(self, call):
        _stack("nccl").append(self.site)
        _nccl_running.append(self.site)
        return None

    def stop(self, call, state):
        stack = _stack("nccl")
        if stack and stack[-1] is self.site:
            stack.pop()
        if self.site in _nccl_running:
            _nccl_running.remove(self.site)


_PROBES = {"timing": _Timing, "cuda_events": _CudaEvents, "memory": _Memory,
           "transfers": _Transfers, "duplicates": _Duplicates, "nccl": _Nccl}


# --- what the inserted code calls ----------------------------------------------------------

def profile(change, name, measure="timing", every=1, rate=None):
    """Decorator: measure sampled calls of the function (sync, async or generator)."""
    site = _site(change, name, measure, every, rate)
    probe = site.probe
    take = site.take

    def decorate(fn):
        if inspect.isasyncgenfunction(fn):
            _note(change, "%s is an async generator: not measured" % name)
            return fn
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapper(*a, **k):
                call = take()
                if not call:
                    return await fn(*a, **k)
                state = probe.start(call)
                try:
                    return await fn(*a, **k)
                finally:
                    probe.stop(call, state)
        elif inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def wrapper(*a, **k):
                call = take()
                if not call:
                    return (yield from fn(*a, **k))
                state = probe.start(call)
                try:
                    return (yield from fn(*a, **k))
                finally:
                    probe.stop(call, state)
        elif site.every == 1 and site.rate >= 1.0:
            @functools.wraps(fn)
            def wrapper(*a, **k):
                call = take()
                state = probe.start(call)
                try:
                    return fn(*a, **k)
                finally:
                    probe.stop(call, state)
        else:
            # The unsampled path is two closure counters and a test: no attribute, no method
            # call, no modulo; the rate is drawn only when the countdown comes round.
            every, rate, rand = site.every, site.rate, random.random
            n = 0
            left = 1

            @functools.wraps(fn)
            def wrapper(*a, **k):
                nonlocal n, left
                n += 1
                left -= 1
                if left:
                    return fn(*a, **k)
                left = every
                if rate < 1.0 and rand() >= rate:
                    return fn(*a, **k)
                site.sampled += 1
                call = n - site.offset
                state = probe.start(call)
                try:
                    return fn(*a, **k)
                finally:
                    probe.stop(call, state)
            site.counters.append(lambda: n)
        return wrapper
    return decorate


class _Block:
    __slots__ = ("site", "call", "state")

    def __init__(self, site):
        self.site = site

    def __enter__(self):
        self.call = self.site.take()
        if self.call:
            self.state = self.site.probe.start(self.call)
        return self

    def __exit__(self, *exc):
        if self.call:
            self.site.probe.stop(self.call, self.state)
        return False


def block(change, name, measure="timing", every=1, rate=None):
    """Context manager: measure sampled passes through the block."""
    return _Block(_site(change, name, measure, every, rate))


def start(change, name, measure="timing", every=1, rate=None):
    """Inline start mark; pass what it returns to stop()."""
    site = _site(change, name, measure, every, rate)
    call = site.take()
    if not call:
        return None
    return (site, call, site.probe.start(call))


def stop(token):
    """Inline end mark."""
    if token is not None:
        site, call, state = token
        site.probe.stop(call, state)


# --- the runner strategy: wrap named functions of a file at import time -------------------

def _find_def(tree, qualname):
    import ast
    parts = qualname.replace(".<locals>.", ".").split(".")

    def search(body, i):
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if n.name == parts[i]:
                    if i == len(parts) - 1:
                        if not isinstance(n, ast.ClassDef):
                            return n
                    else:
                        found = search(n.body, i + 1)
                        if found is not None:
                            return found
            else:
                for field in ("body", "orelse", "finalbody"):
                    b = getattr(n, field, None)
                    if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
                        found = search(b, i)
                        if found is not None:
                            return found
                for h in getattr(n, "handlers", None) or []:
                    found = search(h.body, i)
                    if found is not None:
                        return found
        return None
    return search(tree.body, 0)


def _transform(spec, source, filename):
    import ast
    tree = ast.parse(source, filename)
    for qual in spec["functions"]:
        node = _find_def(tree, qual)
        if node is None:
            raise LookupError("%s has no function %s any more" % (filename, qual))
        # Self-contained: runpy runs module code in a namespace we do not get to fill.
        call = ast.parse("__import__('_sp_profile').profile(%r, %r, %r, %d, %r)" % (
            spec["change"], qual, spec["measure"], spec.get("every") or 1, spec.get("rate")),
            mode="eval").body
        for n in ast.walk(call):
            n.lineno = n.end_lineno = node.lineno
            n.col_offset = n.end_col_offset = node.col_offset
        node.decorator_list.append(call)
    return compile(tree, filename, "exec", dont_inherit=True)


def run(spec, argv):
    """Run the target (or the entry named by --sp-entry PATH / --sp-module NAME) with the
    spec's functions wrapped; the file on disk is not touched and no bytecode is cached."""
    import importlib.abc, importlib.machinery, runpy, types
    target = os.path.realpath(spec["target"])
    args = list(argv[1:])
    entry, module = target, None
    if args[:1] == ["--sp-entry"] and len(args) > 1:
        entry, args = args[1], args[2:]
    elif args[:1] == ["--sp-module"] and len(args) > 1:
        module, args = args[1], args[2:]

    class Loader(importlib.machinery.SourceFileLoader):
        def get_code(self, fullname):
            return _transform(spec, self.get_data(self.path), self.path)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target_mod=None):
            found = importlib.machinery.PathFinder.find_spec(name, path)
            if found is not None and found.origin and os.path.realpath(found.origin) == target:
                found.loader = Loader(name, found.origin)
            return found

    sys.meta_path.insert(0, Finder())
    if module is not None:
        sys.argv = [module] + args
        sys.path[0] = os.getcwd()
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return
    entry = os.path.abspath(entry)
    with open(entry, "rb") as f:
        source = f.read()
    if os.path.realpath(entry) == target:
        code = _transform(spec, source, entry)
    else:
        code = compile(source, entry, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__file__ = entry
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    sys.argv = [entry] + args
    sys.path[0] = os.path.dirname(entry)
    exec(code, main.__dict__)
