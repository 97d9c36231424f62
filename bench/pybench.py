"""What the Python benchmarks share: a kmt-server of their own on a free
loopback port, the thread pools of the peers they time, sides timed in
turns, and how two fits agree."""
import contextlib
import os
import statistics
import subprocess
import tempfile
import time

# Before each timed run: threads the run before left spinning (OpenBLAS's
# and libgomp's wait for more work for a while after scikit-learn returns)
# would take the cores from the next run. On 2 cores they added about a
# fifth to a 64-batch run of kmt's that followed scikit-learn's.
SETTLE_SECONDS = 0.2


def timed(runs, repeats):
    """Each of `runs` (callables) `repeats` times in turns, the order
    reversed every other round so that the machine's drift falls on all
    alike, each run after SETTLE_SECONDS idle: for each, (median seconds,
    min, max, the last run's result, median seconds of this process's
    CPU)."""
    times = [[] for _ in runs]
    cpu = [[] for _ in runs]
    results = [None] * len(runs)
    for r in range(repeats):
        order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
        for i in order:
            time.sleep(SETTLE_SECONDS)
            start, start_cpu = time.perf_counter(), time.process_time()
            results[i] = runs[i]()
            times[i].append(time.perf_counter() - start)
            cpu[i].append(time.process_time() - start_cpu)
    return tuple((statistics.median(t), min(t), max(t), result, statistics.median(c))
                 for t, c, result in zip(times, cpu, results))


def started_server(binary, *flags):
    """A kmt-server with the exact models only on a free loopback port,
    with `flags` besides: (process, address)."""
    port_file = os.path.join(tempfile.mkdtemp(prefix="kmt-bench-"), "port")
    proc = subprocess.Popen([binary, "--listen=127.0.0.1:0", f"--port_file={port_file}",
                             "--metrics_listen=127.0.0.1:0", "--model_dir=", *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not os.path.exists(port_file) or not open(port_file).read().strip():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"{binary} did not start")
        time.sleep(0.05)
    return proc, f"127.0.0.1:{int(open(port_file).read())}"


@contextlib.contextmanager
def server_for(address, binary, *flags):
    """`address` if it is given, else the address of a kmt-server started
    from `binary` with `flags` (started_server), stopped on the way out."""
    if address:
        yield address
        return
    proc, started = started_server(binary, *flags)
    try:
        yield started
    finally:
        proc.terminate()
        proc.wait()


def agreement(ours, theirs):
    """The fields of a row comparing two sides timed by `timed`: each side's
    median seconds, and how far the last runs' fitted estimators are apart
    (their inertias' relative difference, the share of equal labels)."""
    a, b = ours[3], theirs[3]
    return dict(kmt_s=round(ours[0], 4), sklearn_s=round(theirs[0], 4),
                inertia_vs_sklearn=abs(a.inertia_ - b.inertia_) / b.inertia_,
                labels_equal=float((a.labels_ == b.labels_).mean()))


def print_thread_pools(limit=0):
    """Limits the process's OpenMP and BLAS threads to `limit` (0: as they
    are) and prints each pool as threadpoolctl reports it."""
    from threadpoolctl import threadpool_info, threadpool_limits
    if limit:
        threadpool_limits(limit)
    for pool in threadpool_info():
        print(f"{pool['prefix']}'s {pool['user_api']}: {pool['internal_api']} "
              f"{pool.get('version') or ''} {pool.get('architecture') or ''}, "
              f"{pool['num_threads']} threads")
