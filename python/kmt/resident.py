"""Whole-dataset clustering on resident shards (the Job RPC), the algorithm
of the C++ coordinator (client/resident_job.cc): the points are split into
contiguous shards, each loaded once on one replica's Job stream (several per
replica with `streams_per_server`) and kept there for the job. Then greedy
(or plain) k-means++ over all shards through SeedSteps, exact Lloyd's
iterations that send only the centers and sum the shards' counts, sums and
objectives in shard order, and a last step for the labels. When a stream
fails (its replica died or restarted) the shard is loaded on another replica
and the step is asked again with the same centers, so the result does not
change. With the same seed, k-means++ chooses the centers the server's
k-means++ chooses on all the points in one batch.
"""
import dataclasses
import math
import queue
import socket
import threading

import grpc
import numpy as np

from .client import ServiceError, channel, float32_bytes, pb, rpc, status_code

# Failures after which the shard goes to another replica: the replica is
# gone, restarting or shutting down. Other codes are the job's own errors.
REPLICA_FAILED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                  grpc.StatusCode.ABORTED, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)


@dataclasses.dataclass
class ResidentResult:
    centers: np.ndarray        # (k, d) float32 final centers
    labels: np.ndarray         # (n,) int32 nearest final center, if asked; else None
    objective: float           # of the final centers, over all points
    initial_objective: float   # of the initial centers
    objectives: list           # after each iteration
    iterations_run: int
    shards: int                # shards the points were split into
    shard_moves: int           # shards loaded again on another replica after a failure


class Mt19937_64:
    """The 64-bit Mersenne Twister as C++'s std::mt19937_64, with the draws of
    the server's Rng (core/random.h), so a seed names the same centers."""
    _N, _M = 312, 156
    _UPPER, _LOWER = 0xFFFFFFFF80000000, 0x7FFFFFFF
    _MASK = (1 << 64) - 1

    def __init__(self, seed):
        self.state = [seed & self._MASK]
        for i in range(1, self._N):
            previous = self.state[-1]
            self.state.append((6364136223846793005 * (previous ^ (previous >> 62)) + i)
                              & self._MASK)
        self.index = self._N

    def _twist(self):
        s, n, m = self.state, self._N, self._M
        for i in range(n):
            x = (s[i] & self._UPPER) | (s[(i + 1) % n] & self._LOWER)
            s[i] = s[(i + m) % n] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
        self.index = 0

    def next(self):
        if self.index >= self._N:
            self._twist()
        y = self.state[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y

    def uniform(self):
        """Uniform on [0, 1) with 53 random bits."""
        return (self.next() >> 11) * 2.0 ** -53

    def below(self, n):
        """Uniform integer in [0, n) without modulo bias."""
        limit = self._MASK - self._MASK % n
        while True:
            r = self.next()
            if r < limit:
                return r % n


def greedy_candidates(k):
    """Candidates per center of greedy k-means++: 2 + floor(ln k)."""
    return 2 + int(math.floor(math.log(k)))


def replica_addresses(target):
    """The replica addresses of a target: "host:port", a list "ipv4:a:p,b:q",
    or "dns:///name:port" resolved to every address it has."""
    if target.startswith(("ipv4:", "ipv6:")):
        return [a for a in target[5:].split(",") if a]
    if not target.startswith("dns:///"):
        return [target]
    host, sep, port = target[7:].rpartition(":")
    if not sep:
        raise ValueError(f"'{target}' has no port")
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ServiceError(grpc.StatusCode.UNAVAILABLE, f"cannot resolve {host}: {e}") from e
    addresses = []
    for family, _, _, _, address in found:
        a = f"{address[0]}:{port}" if family == socket.AF_INET else f"[{address[0]}]:{port}"
        if a not in addresses:
            addresses.append(a)
    return addresses


class _JobStream:
    """One Job stream, fed from a queue, so that a step's requests are sent to
    every shard before any answer is read and the replicas compute at once."""

    def __init__(self, stub, timeout):
        self.requests = queue.SimpleQueue()
        self.answers = stub.Job(iter(self.requests.get, None), timeout=timeout)
        self.failure = None

    def send(self, request):
        self.requests.put(request)

    def receive(self):
        """The next step's response, its labels gathered from the responses
        that follow it; a step's error arrives inside it, a broken stream as
        a ServiceError."""
        if self.failure:
            raise self.failure
        try:
            response = next(self.answers)
            to_follow = response.labels_to_follow
            while to_follow > 0:
                more = next(self.answers)
                if not more.labels or more.labels_to_follow != to_follow - len(more.labels):
                    raise ServiceError(grpc.StatusCode.INTERNAL,
                                       f"a job's labels arrived out of step: {to_follow} to "
                                       f"follow, then {len(more.labels)} with "
                                       f"{more.labels_to_follow} to follow")
                response.labels.extend(more.labels)
                to_follow = more.labels_to_follow
            response.labels_to_follow = 0
            return response
        except grpc.RpcError as e:
            self.failure = ServiceError(e.code(), e.details())
        except StopIteration:
            self.failure = ServiceError(grpc.StatusCode.UNAVAILABLE, "the job stream ended early")
        raise self.failure

    def close(self):
        """Ends the job on the replica (its shard is freed)."""
        self.requests.put(None)
        self.answers.cancel()


class _Shard:
    def __init__(self, first, count, server):
        self.first, self.count, self.server = first, count, server
        self.stream = None
        self.seeded = []  # centers taken into its seeding distances, to replay


def _step_error(response):
    return ServiceError(status_code(response.error.code), response.error.message)


class _Job:
    def __init__(self, servers, points, streams_per_server, chunk_bytes, max_moves, timeout, log,
                 tls):
        self.servers, self.points = servers, points
        self.chunk_bytes, self.max_moves, self.timeout, self.log = (chunk_bytes, max_moves,
                                                                     timeout, log)
        options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        self.channels = [channel(a, options=options, **tls) for a in servers]
        self.stubs = [rpc.KMeansTransformerStub(c) for c in self.channels]
        self.alive = [True] * len(servers)
        n = len(points)
        # No shard without points: a small dataset gets fewer shards.
        count = min(n, len(servers) * streams_per_server)
        self.shards = [_Shard(n * s // count, n * (s + 1) // count - n * s // count,
                              s % len(servers)) for s in range(count)]
        self.moves = 0

    def close(self):
        for shard in self.shards:
            if shard.stream:
                shard.stream.close()
        for c in self.channels:
            c.close()

    def _named(self, s, error):
        return ServiceError(error.code,
                            f"shard {s} on {self.servers[self.shards[s].server]}: {error.message}")

    def load_all(self):
        """Loads every shard on its replica, all at once."""
        results = [None] * len(self.shards)

        def load(s):
            try:
                self._load(self.shards[s])
            except ServiceError as e:
                results[s] = e
        threads = [threading.Thread(target=load, args=(s,)) for s in range(len(self.shards))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s, error in enumerate(results):
            if error is None:
                continue
            if error.code not in REPLICA_FAILED:
                raise self._named(s, error)
            self._move(s, error)

    def round(self, make):
        """One request per shard (none where `make` gives None), all at once;
        the answers in shard order. A shard whose stream fails is moved and
        asked again."""
        answers = [pb.JobResponse() for _ in self.shards]
        requests = [make(s) for s in range(len(self.shards))]
        pending = [s for s, r in enumerate(requests) if r is not None]
        while pending:
            for s in pending:
                self.shards[s].stream.send(requests[s])
            failed = {}
            for s in pending:
                try:
                    r = self.shards[s].stream.receive()
                except ServiceError as e:
                    failed[s] = e
                    continue
                if r.HasField("error"):
                    raise self._named(s, _step_error(r))
                answers[s] = r
                if requests[s].HasField("seed"):
                    self.shards[s].seeded.extend(requests[s].seed.add_centers)
            for s, error in failed.items():
                if error.code not in REPLICA_FAILED:
                    raise self._named(s, error)
                self._move(s, error)
            pending = sorted(failed)
        return answers

    def _load(self, shard):
        """Opens a stream on the shard's replica and sends its points in raw
        chunks, reading the acknowledgements a few chunks behind."""
        if shard.stream:
            shard.stream.close()
        shard.stream = _JobStream(self.stubs[shard.server], self.timeout)
        d = self.points.shape[1]
        chunk = max(1, self.chunk_bytes // (4 * d))
        loaded, unacknowledged = 0, 0
        for start in range(0, shard.count, chunk):
            rows = self.points[shard.first + start:shard.first + min(shard.count, start + chunk)]
            shard.stream.send(pb.JobRequest(shard=pb.ShardChunk(
                n=shard.count, d=d, points_f32=float32_bytes(rows))))
            unacknowledged += 1
            # At most a few chunks in flight: the points are not copied whole.
            while unacknowledged > 4 or (unacknowledged and start + chunk >= shard.count):
                r = shard.stream.receive()
                if r.HasField("error"):
                    raise _step_error(r)
                loaded, unacknowledged = r.points_loaded, unacknowledged - 1
        if loaded != shard.count:
            raise ServiceError(grpc.StatusCode.INTERNAL,
                               f"the replica holds {loaded} of {shard.count} points")
        # A shard moved during k-means++ gets back the distances it had.
        if shard.seeded:
            shard.stream.send(pb.JobRequest(seed=pb.SeedStep(add_centers=shard.seeded)))
            r = shard.stream.receive()
            if r.HasField("error"):
                raise _step_error(r)

    def _move(self, s, why):
        """After `why`, the shard's replica is taken as gone and the shard goes
        to the live replica with the fewest shards."""
        shard = self.shards[s]
        while True:
            self.alive[shard.server] = False
            self.moves += 1
            if self.moves > self.max_moves:
                raise self._named(s, ServiceError(
                    why.code, f"gave up after {self.moves - 1} shard moves: {why.message}"))
            load = [0] * len(self.servers)
            for other in self.shards:
                load[other.server] += 1
            live = [r for r in range(len(self.servers)) if self.alive[r]]
            if not live:
                raise self._named(s, ServiceError(why.code, f"no replica left: {why.message}"))
            best = min(live, key=lambda r: load[r])
            if self.log:
                self.log(f"shard {s}: {self.servers[shard.server]} failed ({why}); loading it on "
                         f"{self.servers[best]} and repeating the step")
            shard.server = best
            try:
                self._load(shard)
                return
            except ServiceError as e:
                if e.code not in REPLICA_FAILED:
                    raise self._named(s, e) from e
                why = e


def _seed(job, d, k, seed, trials, log):
    """k-means++ with `trials` candidates per center over the job's shards
    (ShardedKMeansPlusPlus in core/seeding.h), one round per step."""
    sizes = [shard.count for shard in job.shards]
    shards = len(sizes)
    n = sum(sizes)
    rng = Mt19937_64(seed)
    requests = [{} for _ in range(shards)]

    def run():
        def make(s):
            r = requests[s]
            if not r:
                return None
            return pb.JobRequest(seed=pb.SeedStep(
                add_centers=r.get("add", []), point_indices=r.get("indices", []),
                draw_targets=r.get("targets", []), candidates=r.get("candidates", [])))
        answers = job.round(make)
        for r in requests:
            r.clear()
        return answers

    centers = np.zeros((k, d), dtype=np.float32)
    # The first center: a point drawn uniformly.
    first, s = rng.below(n), 0
    while first >= sizes[s]:
        first -= sizes[s]
        s += 1
    requests[s]["indices"] = [first]
    centers[0] = run()[s].points[:d]
    for r in requests:
        r["add"] = centers[0].tolist()
    shard_potential = [0.0] * shards
    for j in range(1, k):
        if j == 1:
            shard_potential = [a.potential for a in run()]
        if log and (j & (j - 1)) == 0:
            log(f"k-means++: {j} of {k} centers chosen")
        potential = sum(shard_potential)
        # Draw the candidates: a position in the running sum over the shards
        # in order, then the point within the shard that holds it.
        drawn = []
        for _ in range(trials):
            target, s = rng.uniform() * potential, 0
            while s + 1 < shards and (sizes[s] == 0 or target >= shard_potential[s]):
                target -= shard_potential[s]
                s += 1
            while sizes[s] == 0:  # past the end by round-off: the last point
                s -= 1
            r = requests[s]
            drawn.append((s, len(r.get("indices", [])) + len(r.get("targets", []))))
            r.setdefault("targets", []).append(min(max(target, 0.0), shard_potential[s]))
        answers = run()
        candidates = np.array([answers[s].points[c * d:(c + 1) * d] for s, c in drawn],
                              dtype=np.float32)
        flat = candidates.ravel().tolist()
        for r in requests:
            r["candidates"] = flat
        answers = run()
        totals = [0.0] * trials
        for a in answers:
            if len(a.candidate_potentials) != trials:
                raise ServiceError(grpc.StatusCode.INTERNAL,
                                   "a shard answered the wrong number of candidate potentials")
            for t in range(trials):
                totals[t] += a.candidate_potentials[t]
        best = totals.index(min(totals))
        centers[j] = candidates[best]
        shard_potential = [a.candidate_potentials[best] for a in answers]
        for r in requests:
            r["add"] = centers[j].tolist()
    return centers


def fit_resident(target, points, k, centers=None, iterations=20, tol=0.0, seed=1,
                 plain_seeding=False, labels=True, streams_per_server=1, chunk_bytes=4 << 20,
                 max_moves=3, timeout=None, log=None, **tls):
    """Clusters the (n, d) `points` on the replicas `target` names (as
    replica_addresses reads it), from `centers` (k, d) if given, else from
    k-means++ over all of them (greedy, or plain with `plain_seeding`), for
    up to `iterations` Lloyd's steps: fewer once an iteration moves the
    centers by a total squared shift of at most tol times the points' mean
    per-dimension variance (scikit-learn's rule; tol = 0: a fixed point). `timeout` is each stream's deadline, `log` a
    function of a line of progress, `tls` as kmt.channel() takes it."""
    points = np.asarray(points)
    if points.ndim != 2:
        raise ValueError(f"points has shape {points.shape}, expected (n, d)")
    n, d = points.shape
    if streams_per_server < 1 or iterations < 0 or tol < 0:
        raise ValueError(f"streams per server {streams_per_server}, iterations {iterations}, "
                         f"tol {tol}: none may be negative")
    if k < 1 or n < k:
        raise ValueError(f"k = {k} needs 1 <= k <= n = {n} points")
    servers = replica_addresses(target)
    job = _Job(servers, points, streams_per_server, chunk_bytes, max_moves, timeout, log, tls)
    try:
        job.load_all()
        if centers is None:
            centers = _seed(job, d, k, seed, 1 if plain_seeding else greedy_candidates(k), log)
        centers = np.array(centers, dtype=np.float32).reshape(k, d)
        result = ResidentResult(centers=None, labels=None, objective=0.0, initial_objective=0.0,
                                objectives=[], iterations_run=0, shards=len(job.shards),
                                shard_moves=0)
        shift_tolerance = tol * float(np.mean(np.var(points, axis=0, dtype=np.float64)))
        # Step t assigns under the centers after t iterations; the last one
        # (after `iterations`, or once converged) also gives the labels.
        t = 0
        while True:
            last = t == iterations
            step = pb.JobRequest(assign=pb.AssignStep(
                k=k, centers_f32=float32_bytes(centers), return_labels=last and labels))
            answers = job.round(lambda s: step)
            # Summed in shard order, so a repeated step gives the same bits.
            objective, counts, sums = 0.0, np.zeros(k, dtype=np.int64), np.zeros((k, d))
            for a in answers:
                objective += a.objective
                counts += np.asarray(a.center_counts, dtype=np.int64)
                sums += np.asarray(a.center_sums, dtype=np.float64).reshape(k, d)
            if t == 0:
                result.initial_objective = objective
            else:
                result.objectives.append(objective)
            if log:
                log(f"step {t} objective {objective}")
            if last:
                result.objective = objective
                if labels:
                    result.labels = np.concatenate(
                        [np.asarray(a.labels, dtype=np.int32) for a in answers])
                break
            updated = centers.copy()
            filled = counts > 0  # an empty cluster keeps its center
            updated[filled] = (sums[filled] / counts[filled, None]).astype(np.float32)
            shift = (updated - centers).astype(np.float64).ravel()
            converged = float(shift @ shift) <= shift_tolerance
            centers = updated
            result.iterations_run = t + 1
            t = iterations if converged else t + 1  # only the labels step remains
        result.centers = centers
        result.shard_moves = job.moves
        return result
    finally:
        job.close()

