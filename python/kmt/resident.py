"""Whole-dataset clustering on resident shards (the Job RPC), the algorithm
of the C++ coordinator (client/resident_job.cc): the points are split into
contiguous shards, each loaded once on one replica's Job stream (several per
replica with `streams_per_server`) and kept there for the job. Then greedy
(or plain) k-means++ over all shards through SeedSteps, k-means‖ through
KMeansParallelSteps, or k distinct points drawn as the server's INIT_RANDOM
draws them, exact Lloyd's iterations that
send only the centers and sum the shards' counts, weights, sums and
objectives in shard order, and a last step for the labels. When a stream
fails (its replica died or restarted) the shard is loaded on another replica
and the step is asked again with the same centers, so the result does not
change. With the same seed, the initialisation chooses the centers the
server's chooses on all the points in one batch.

scikit-learn's rules are options: per-point weights, its tolerance (the
total squared center shift against a threshold), and its relocation of
empty clusters to the points farthest from their centers, done here from
the labels of a repeated step and the points the client holds.
"""
import dataclasses
import math
import queue
import socket
import threading

import grpc
import numpy as np

from .client import (ServiceError, channel, float32_bytes, init_name, pb, rpc, server_target,
                     status_code)

# Failures after which the shard goes to another replica: the replica is
# gone, restarting or shutting down. Other codes are the job's own errors.
REPLICA_FAILED = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                  grpc.StatusCode.ABORTED, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)


@dataclasses.dataclass
class ResidentResult:
    centers: np.ndarray        # (k, d) final centers: float32, or the offset's dtype
    labels: np.ndarray         # (n,) int32 nearest final center, if asked; else None
    objective: float           # of the final centers, over all points
    initial_objective: float   # of the initial centers
    objectives: list           # after each iteration
    iterations_run: int
    shards: int                # shards the points were split into
    shard_moves: int           # shards loaded again on another replica after a failure
    convergence: int = 0       # why the iterations stopped early: a kmt.pb.ConvergenceReason
    relocations: int = 0       # empty clusters moved to far points (relocate-farthest)
    restart_objectives: list = dataclasses.field(default_factory=list)  # with n_init > 1
    best_restart: int = 0


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

    def uniforms(self, count):
        """The next `count` uniform() draws as a float64 array, the twists and
        tempering done on numpy words (a million draws in milliseconds)."""
        out = np.empty(count, dtype=np.uint64)
        state = np.array(self.state, dtype=np.uint64)
        done = 0
        while done < count:
            if self.index >= self._N:
                self._twist_words(state)
                self.index = 0
            take = min(count - done, self._N - self.index)
            out[done:done + take] = state[self.index:self.index + take]
            self.index += take
            done += take
        self.state = [int(v) for v in state]
        y = out
        y ^= (y >> np.uint64(29)) & np.uint64(0x5555555555555555)
        y ^= (y << np.uint64(17)) & np.uint64(0x71D67FFFEDA60000)
        y ^= (y << np.uint64(37)) & np.uint64(0xFFF7EEE000000000)
        y ^= y >> np.uint64(43)
        return (y >> np.uint64(11)).astype(np.float64) * 2.0 ** -53

    @classmethod
    def _twist_words(cls, s):
        """_twist on a numpy state, in the three runs whose reads do not
        depend on their own writes."""
        n, m = cls._N, cls._M
        upper, lower = np.uint64(cls._UPPER), np.uint64(cls._LOWER)
        matrix = np.uint64(0xB5026F5AA96619E9)

        def mixed(here, following, far):
            x = (here & upper) | (following & lower)
            return far ^ (x >> np.uint64(1)) ^ np.where(x & np.uint64(1), matrix, np.uint64(0))
        s[:n - m] = mixed(s[:n - m], s[1:n - m + 1], s[m:])
        s[n - m:n - 1] = mixed(s[n - m:n - 1], s[n - m + 1:], s[:m - 1])
        s[n - 1] = mixed(s[n - 1], s[0], s[m - 1])

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


def replica_addresses(target=None):
    """The replica addresses of a target: "host:port", a list "ipv4:a:p,b:q",
    or "dns:///name:port" resolved to every address it has; None: as
    kmt.Client's default ($KMT_SERVER, else localhost:50051)."""
    target = server_target(target)
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


# How long closing a stream waits for the replica's final status before it
# cancels the call instead.
CLOSE_SECONDS = 10.0


class _JobStream:
    """One Job stream, fed from a queue, so that a step's requests are sent to
    every shard before any answer is read and the replicas compute at once."""

    def __init__(self, stub, timeout):
        self.requests = queue.SimpleQueue()
        self.answers = stub.Job(iter(self.requests.get, None), timeout=timeout)
        self.failure = None
        self.unanswered = 0  # requests sent whose response has not been read
        self.writes_done = False

    def send(self, request):
        self.requests.put(request)
        self.unanswered += 1

    def receive(self):
        """The next step's response, its labels gathered from the responses
        that follow it; a step's error arrives inside it, a broken stream as
        a ServiceError."""
        if self.failure:
            raise self.failure
        try:
            response = next(self.answers)
            to_follow = response.labels_to_follow
            raw = [response.labels_i32]
            while to_follow > 0:
                more = next(self.answers)
                count = len(more.labels_i32) // 4 + len(more.labels)
                if not count or more.labels_to_follow != to_follow - count:
                    raise ServiceError(grpc.StatusCode.INTERNAL,
                                       f"a job's labels arrived out of step: {to_follow} to "
                                       f"follow, then {count} with "
                                       f"{more.labels_to_follow} to follow")
                response.labels.extend(more.labels)
                raw.append(more.labels_i32)
                to_follow = more.labels_to_follow
            if len(raw) > 1:
                response.labels_i32 = b"".join(raw)
            response.labels_to_follow = 0
            self.unanswered -= 1
            return response
        except grpc.RpcError as e:
            self.failure = ServiceError(e.code(), e.details())
        except StopIteration:
            self.failure = ServiceError(grpc.StatusCode.UNAVAILABLE, "the job stream ended early")
        raise self.failure

    def end_writes(self):
        """Ends the job on the replica (its shard is freed) as the C++ client
        does, with the end of the writes (WritesDone); wait_closed reads the
        status it ends with."""
        if not self.writes_done:
            self.writes_done = True
            self.requests.put(None)

    def wait_closed(self):
        """After end_writes: the replica's final status read, so that a job
        that ended as its client intended ends OK on the server, not
        CANCELLED. A stream that failed, has a request unanswered or does not
        end within CLOSE_SECONDS is cancelled."""
        if self.failure is None and self.unanswered == 0:
            try:
                self.answers.exception(timeout=CLOSE_SECONDS)
            except grpc.FutureTimeoutError:
                pass
        self.answers.cancel()  # a no-op once the call is over

    def close(self):
        """Ends the job on the replica (its shard is freed)."""
        self.end_writes()
        self.wait_closed()


def close_streams(streams):
    """Closes Job streams, their writes ended at once and their statuses
    read after, so that closing many takes one round trip."""
    streams = list(streams)
    for stream in streams:
        stream.end_writes()
    for stream in streams:
        stream.wait_closed()


class _Shard:
    def __init__(self, first, count, server):
        self.first, self.count, self.server = first, count, server
        self.stream = None
        self.seeded = []  # centers taken into its seeding distances, to replay
        self.groups = []  # k-means‖'s groups of centers taken in, as float32 bytes, to replay


def _step_error(response):
    return ServiceError(status_code(response.error.code), response.error.message)


def dense_rows(points, offset=None):
    """rows(first, end): points[first:end] as a dense array (a sparse matrix
    densified block by block) minus `offset` if given, in the points' dtype
    (float32 if they are integers)."""
    def rows(first, end):
        block = points[first:end]
        if hasattr(block, "toarray"):
            block = block.toarray()
        block = np.asarray(block)
        if block.dtype.kind not in "f":
            block = block.astype(np.float32)
        return block if offset is None else block - offset
    return rows


def load_shard(stream, rows, weights, count, d, chunk_bytes, seeded=(), groups=()):
    """Sends a shard of `count` points on a fresh Job stream in raw chunks of
    about `chunk_bytes`, reading the acknowledgements a few chunks behind:
    rows(first, end) are its points [first, end) as the replica is to hold
    them, `weights` (count,) theirs or None. Then the shard takes `seeded`
    (the k-means++ centers chosen before it moved there) into its
    distances, and k-means‖'s `groups` (float32 bytes each) in the same
    groups, so that its distances are those it had to the bit."""
    chunk = max(1, chunk_bytes // (4 * d))
    loaded, unacknowledged = 0, 0
    for start in range(0, count, chunk):
        end = min(count, start + chunk)
        message = pb.ShardChunk(n=count, d=d, points_f32=float32_bytes(rows(start, end)))
        if weights is not None:
            message.weights_f32 = float32_bytes(weights[start:end])
        stream.send(pb.JobRequest(shard=message))
        unacknowledged += 1
        # At most a few chunks in flight: the points are not copied whole.
        while unacknowledged > 4 or (unacknowledged and end >= count):
            r = stream.receive()
            if r.HasField("error"):
                raise _step_error(r)
            loaded, unacknowledged = r.points_loaded, unacknowledged - 1
    if loaded != count:
        raise ServiceError(grpc.StatusCode.INTERNAL,
                           f"the replica holds {loaded} of {count} points")
    replays = [pb.JobRequest(seed=pb.SeedStep(add_centers=seeded))] if seeded else []
    replays += [pb.JobRequest(kmeans_parallel=pb.KMeansParallelStep(add_centers_f32=group))
                for group in groups]
    for replay in replays:
        stream.send(replay)
        r = stream.receive()
        if r.HasField("error"):
            raise _step_error(r)


def note_replays(shard, request):
    """Keeps what a shard's answered `request` took into its seeding
    distances, for a reload to replay (load_shard)."""
    if request.HasField("seed"):
        shard.seeded.extend(request.seed.add_centers)
    if request.HasField("kmeans_parallel") and request.kmeans_parallel.add_centers_f32:
        shard.groups.append(request.kmeans_parallel.add_centers_f32)


def assign_request(centers, with_labels):
    """The Lloyd's step under `centers` (k, d) float32; its labels, if
    asked, come as int32 bytes (step_labels reads them)."""
    return pb.JobRequest(assign=pb.AssignStep(
        k=centers.shape[0], centers_f32=float32_bytes(centers), return_labels=with_labels,
        raw_labels=True))


class _Job:
    def __init__(self, servers, points, weights, rows, streams_per_server, chunk_bytes, max_moves,
                 timeout, log, tls):
        self.servers, self.points, self.weights, self.rows = servers, points, weights, rows
        self.chunk_bytes, self.max_moves, self.timeout, self.log = (chunk_bytes, max_moves,
                                                                     timeout, log)
        options = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        self.channels = [channel(a, options=options, **tls) for a in servers]
        self.stubs = [rpc.KMeansTransformerStub(c) for c in self.channels]
        self.alive = [True] * len(servers)
        n = points.shape[0]
        # No shard without points: a small dataset gets fewer shards.
        count = min(n, len(servers) * streams_per_server)
        self.shards = [_Shard(n * s // count, n * (s + 1) // count - n * s // count,
                              s % len(servers)) for s in range(count)]
        self.moves = 0

    def close(self):
        close_streams(shard.stream for shard in self.shards if shard.stream)
        for c in self.channels:
            c.close()

    def _named(self, s, error):
        return ServiceError(error.code,
                            f"shard {s} on {self.servers[self.shards[s].server]}: {error.message}")

    def reload_all(self):
        """Every shard loaded afresh (a new k-means++ starts from no chosen
        center, which only a new stream gives)."""
        for shard in self.shards:
            shard.seeded, shard.groups = [], []
        self.load_all()

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
                note_replays(self.shards[s], requests[s])
            for s, error in failed.items():
                if error.code not in REPLICA_FAILED:
                    raise self._named(s, error)
                self._move(s, error)
            pending = sorted(failed)
        return answers

    def _load(self, shard):
        """Opens a stream on the shard's replica and sends its points."""
        if shard.stream:
            shard.stream.close()
        shard.stream = _JobStream(self.stubs[shard.server], self.timeout)
        first, end = shard.first, shard.first + shard.count
        load_shard(shard.stream, lambda a, b: self.rows(first + a, first + b),
                   None if self.weights is None else self.weights[first:end], shard.count,
                   self.points.shape[1], self.chunk_bytes, shard.seeded, shard.groups)

    def relocate(self, centers, counts, weights, sums):
        """scikit-learn's relocation of the empty clusters (_relocate), from
        the labels of the step under `centers` asked again."""
        request = assign_request(centers, True)
        answers = self.round(lambda s: request)
        return _relocate(self, centers, answers, counts, weights, sums, self.log)

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
    (ShardedKMeansPlusPlus in core/seeding.h), one round per step; on
    weighted shards each draw is in proportion to w times the squared
    distance, the first by w."""
    sizes = [shard.count for shard in job.shards]
    shards = len(sizes)
    n = sum(sizes)
    rng = Mt19937_64(seed)
    requests = [{} for _ in range(shards)]

    def run(every=False):
        def make(s):
            r = requests[s]
            if not r and not every:
                return None
            return pb.JobRequest(seed=pb.SeedStep(
                add_centers=r.get("add", []), point_indices=r.get("indices", []),
                draw_targets=r.get("targets", []), candidates=r.get("candidates", [])))
        answers = job.round(make)
        for r in requests:
            r.clear()
        return answers

    shard_potential = [0.0] * shards

    def draw(target):
        """A position in the running sum of the shards' potentials, in shard
        order, asked of the shard that holds it: (shard, answer index)."""
        s = 0
        while s + 1 < shards and (sizes[s] == 0 or target >= shard_potential[s]):
            target -= shard_potential[s]
            s += 1
        while sizes[s] == 0:  # past the end by round-off: the last point
            s -= 1
        r = requests[s]
        at = (s, len(r.get("indices", [])) + len(r.get("targets", [])))
        r.setdefault("targets", []).append(min(max(target, 0.0), shard_potential[s]))
        return at

    centers = np.zeros((k, d), dtype=np.float32)
    if job.weights is not None:
        # The first center drawn by weight: the shards' potentials are their
        # weights' sums before any center.
        shard_potential = [a.potential for a in run(every=True)]
        s, c = draw(rng.uniform() * sum(shard_potential))
        centers[0] = run()[s].points[c * d:(c + 1) * d]
    else:
        # The first center: a point drawn uniformly.
        first, s = rng.below(n), 0
        while first >= sizes[s]:
            first -= sizes[s]
            s += 1
        requests[s]["indices"] = [first]
        centers[0] = run()[s].points[:d]
    for r in requests:
        r["add"] = centers[0].tolist()
    for j in range(1, k):
        if j == 1:
            shard_potential = [a.potential for a in run()]
        if log and (j & (j - 1)) == 0:
            log(f"k-means++: {j} of {k} centers chosen")
        potential = sum(shard_potential)
        drawn = [draw(rng.uniform() * potential) for _ in range(trials)]
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


# k-means‖'s rounds and oversampling factor (l / k) unless told: the C++
# coordinator's (ResidentJobOptions in client/resident_job.h).
KMEANS_PARALLEL_ROUNDS = 2
KMEANS_PARALLEL_OVERSAMPLING = 1.0


def _seed_parallel(job, d, k, seed, rounds, oversampling, log):
    """k-means‖ (Bahmani et al., "Scalable K-Means++", arXiv 1203.6402) over
    the job's shards, as the C++ coordinator runs it (SeedKMeansParallel in
    client/resident_job.cc), so that a seed gives its centers: k-means++'s
    first center, then each round takes the previous round's points into the
    shards' distances and samples about l = oversampling * k points by them,
    for `rounds` rounds or more while there are fewer than k candidates; a
    last step takes the last round's points in and answers each candidate's
    weight, and weighted greedy k-means++ chooses k of them here."""
    if rounds < 1 or not math.isfinite(oversampling) or oversampling <= 0:
        raise ValueError(f"k-means|| with {rounds} rounds and oversampling {oversampling}: "
                         "needs at least 1 round and oversampling > 0")
    first = _seed(job, d, 1, seed, 1, log)
    candidates, fresh = [first], first
    ell = oversampling * k
    most_rounds = rounds + 64

    def take_in(centers, return_weights=False):
        request = pb.JobRequest(kmeans_parallel=pb.KMeansParallelStep(
            add_centers_f32=float32_bytes(centers) if len(centers) else b"",
            return_weights=return_weights))
        return job.round(lambda s: request)

    def summed(answers):
        potential = 0.0
        for a in answers:  # in shard order, as the C++ coordinator adds them
            potential += a.potential
        return potential

    potential = summed(take_in(fresh))
    r = 0
    while potential > 0:
        r += 1
        answers = job.round(lambda s: pb.JobRequest(kmeans_parallel=pb.KMeansParallelStep(
            oversampling=ell, potential=potential, seed=seed, round=r,
            first_point=job.shards[s].first)))
        for a in answers:
            if len(a.sampled_points) != len(a.sampled_indices) * d:
                raise ServiceError(grpc.StatusCode.INTERNAL,
                                   f"a k-means|| step answered {len(a.sampled_points)} values "
                                   f"for {len(a.sampled_indices)} points in d = {d}")
        fresh = np.array([v for a in answers for v in a.sampled_points],
                         dtype=np.float32).reshape(-1, d)
        candidates.append(fresh)
        count = sum(len(c) for c in candidates)
        if log:
            log(f"k-means||: round {r} sampled {len(fresh)} points ({count} candidates) at "
                f"potential {potential}")
        if (r >= rounds and count >= k) or r >= most_rounds:
            break
        if len(fresh):
            potential = summed(take_in(fresh))
    candidates = np.concatenate(candidates)
    answers = take_in(fresh if potential > 0 else fresh[:0], return_weights=True)
    weights = np.zeros(len(candidates))
    for a in answers:
        if len(a.candidate_weights) != len(candidates):
            raise ServiceError(grpc.StatusCode.INTERNAL,
                               f"a k-means|| step answered {len(a.candidate_weights)} weights "
                               f"for {len(candidates)} candidates")
        weights += np.asarray(a.candidate_weights, dtype=np.float64)
    if log:
        log(f"k-means||: {r} rounds, {len(candidates)} candidates")
    positive = weights > 0
    if positive.sum() >= k:
        return weighted_kmeans_plusplus(candidates.astype(np.float64), weights, k,
                                        seed).astype(np.float32)
    # Fewer than k distinct points: each is a center, the first repeated.
    distinct = candidates[positive]
    if log:
        log(f"k-means||: only {len(distinct)} distinct points for k = {k}; the first is "
            "repeated")
    return np.concatenate([distinct, np.repeat(distinct[:1], k - len(distinct), axis=0)])


def _product_distances(points, point_sq, center):
    """The squared distances of the rows of `points` (norms `point_sq`) to
    one center in product form, clamped at 0 (core/distances.h)."""
    return np.maximum((-2.0 * (points @ center) + point_sq) + center @ center, 0.0)


def weighted_kmeans_plusplus(points, weights, k, seed):
    """Greedy k-means++ of the (m, d) float64 `points` weighted by
    `weights` (at least k positive), seeded `seed`: the core's k-means++ on
    one weighted matrix in double (ShardedKMeansPlusPlus over one shard,
    core/seeding.cc), with its draws, distances and order of choices, so
    that it chooses the C++ coordinator's centers (up to the last bit of
    sums added in another order)."""
    m, d = points.shape
    trials = greedy_candidates(k)
    rng = Mt19937_64(seed)
    point_sq = (points * points).sum(axis=1)
    closest = weights.astype(np.float64).copy()  # before any center: drawn by weight
    roundoff = 2 * (d + 4) * np.finfo(np.float64).eps

    def find(target):
        """The first point whose running sum of distances exceeds target;
        past the end by round-off, the last at a positive distance."""
        i = int(np.searchsorted(np.cumsum(closest), target, side="right"))
        if i < m:
            return i
        i = m - 1
        while i > 0 and closest[i] == 0:
            i -= 1
        return i

    def take(center, first):
        sq = _product_distances(points, point_sq, center)
        # Near-zero distances decided exactly: a copy of a center weighs 0.
        near = sq <= roundoff * (point_sq + center @ center)
        sq[near] = ((points[near] - center) ** 2).sum(axis=1)
        distance = weights * sq
        if first:
            closest[:] = distance
        else:
            np.minimum(closest, distance, out=closest)

    centers = np.empty((k, d))
    potential = closest.sum()
    centers[0] = points[find(min(max(rng.uniform() * potential, 0.0), potential))]
    take(centers[0], True)
    potential = closest.sum()
    for j in range(1, k):
        drawn = [find(min(max(rng.uniform() * potential, 0.0), potential))
                 for _ in range(trials)]
        totals = [np.minimum(closest, weights * _product_distances(points, point_sq,
                                                                   points[i])).sum()
                  for i in drawn]
        best = int(np.argmin(totals))
        centers[j] = points[drawn[best]]
        potential = totals[best]
        take(centers[j], False)
    return centers


def random_subset(n, k, seed, weights=None):
    """The indices of the k distinct points the server's INIT_RANDOM chooses
    among n for `seed` (core/init.cc): a partial Fisher-Yates shuffle, or
    with weights the k largest keys log(u) / w (u uniform on (0, 1], one
    draw per point; points of weight 0 never), ties to the lower index."""
    rng = Mt19937_64(seed)
    if weights is not None:
        u = 1.0 - rng.uniforms(n)
        w = np.asarray(weights, dtype=np.float32).astype(np.float64)
        positive = np.flatnonzero(w > 0)
        if len(positive) < k:
            raise ValueError(f"only {len(positive)} points have a positive weight, fewer than "
                             f"k = {k}")
        keys = np.log(u[positive]) / w[positive]
        # Largest key first, the lower index first among equal keys.
        return positive[np.lexsort((positive, -keys))[:k]].tolist()
    moved, chosen = {}, []
    for j in range(k):
        pick = j + rng.below(n - j)
        chosen.append(moved.get(pick, pick))
        moved[pick] = moved.get(j, j)
    return chosen


def restart_seed(seed, restart):
    """The seed of restart `restart` of a run seeded `seed`, as the server
    derives it for n_init."""
    return (seed + restart) & Mt19937_64._MASK


def _initial_centers(job, d, k, init, seed, log):
    if init == "kmeans||":
        return _seed_parallel(job, d, k, seed, KMEANS_PARALLEL_ROUNDS,
                              KMEANS_PARALLEL_OVERSAMPLING, log)
    if init == "random":
        return np.concatenate([job.rows(i, i + 1) for i in random_subset(
            job.points.shape[0], k, seed, job.weights)]).astype(np.float32)
    trials = 1 if init == "plain-kmeans++" else greedy_candidates(k)
    return _seed(job, d, k, seed, trials, log)


def step_labels(answer):
    """An assign step's labels (as the shard answered them: raw or repeated)
    as an int32 array."""
    if answer.labels_i32:
        return np.frombuffer(answer.labels_i32, dtype="<i4").astype(np.int32, copy=False)
    return np.asarray(answer.labels, dtype=np.int32)


def _relocate(job, centers, answers, counts, weights, sums, log):
    """scikit-learn's rule for the clusters whose points weigh nothing under
    `centers`: each takes one of the points farthest from their own centers
    (labels from `answers`, a step that returned them), which leaves the
    cluster it was in. Changes counts, weights and sums in place; returns how
    many clusters moved."""
    empty = np.flatnonzero(~(weights > 0))
    labels = np.concatenate([step_labels(a) for a in answers])
    distances = []
    block = 65536
    for first in range(0, len(labels), block):
        end = min(len(labels), first + block)
        x = job.rows(first, end).astype(np.float32)  # as the shards hold them
        distances.append(((x - centers[labels[first:end]]) ** 2).sum(axis=1))
    distances = np.concatenate(distances)
    # The server's order (core/empty_clusters.cc): points of positive weight,
    # farthest first, the lower index first among equal distances.
    candidates = (np.arange(len(labels)) if job.weights is None
                  else np.flatnonzero(job.weights > 0))
    by_distance = candidates[np.lexsort((candidates, -distances[candidates]))]
    far = by_distance[:len(empty)]
    for j, i in zip(empty, far):
        x = job.rows(i, i + 1)[0].astype(np.float32).astype(np.float64)
        w = 1.0 if job.weights is None else float(np.float32(job.weights[i]))
        old = labels[i]
        sums[old] -= x * w
        weights[old] -= w
        counts[old] -= 1
        sums[j], weights[j], counts[j] = x * w, w, 1
    if log:
        log(f"relocated {len(far)} empty clusters")
    return len(far)


def _lloyd(job, centers, k, iterations, tol, center_tol, relocate, labels, on_iteration, log,
           result):
    """Lloyd's steps from `centers` on the job's shards; fills `result`."""
    d = centers.shape[1]
    weighted = job.weights is not None
    # Step t assigns under the centers after t iterations; the last one
    # (after `iterations`, or once converged) also gives the labels.
    previous, t = 0.0, 0
    while True:
        last = t == iterations

        request = assign_request(centers, last and labels)
        answers = job.round(lambda s: request)
        # Summed in shard order, so a repeated step gives the same bits.
        objective, counts, sums = 0.0, np.zeros(k, dtype=np.int64), np.zeros((k, d))
        weights = np.zeros(k)
        for a in answers:
            objective += a.objective
            counts += np.asarray(a.center_counts, dtype=np.int64)
            sums += np.asarray(a.center_sums, dtype=np.float64).reshape(k, d)
            if weighted:
                weights += np.asarray(a.center_weights, dtype=np.float64)
        if not weighted:
            weights = counts.astype(np.float64)
        if t == 0:
            result.initial_objective = objective
        else:
            result.objectives.append(objective)
        if log:
            log(f"step {t} objective {objective}")
        if last:
            result.objective = objective
            if labels:
                result.labels = np.concatenate([step_labels(a) for a in answers])
            break
        if relocate and (weights == 0).any():
            result.relocations += job.relocate(centers, counts, weights, sums)
        updated = centers.copy()
        filled = weights > 0  # an empty cluster keeps its center
        updated[filled] = (sums[filled] / weights[filled, None]).astype(np.float32)
        shift = float(((updated.astype(np.float64) - centers) ** 2).sum())
        if np.array_equal(updated, centers):
            result.convergence = pb.CONVERGENCE_LABELS_UNCHANGED
        elif center_tol is not None and shift <= center_tol:
            result.convergence = pb.CONVERGENCE_TOLERANCE
        elif tol > 0 and t > 0 and previous - objective <= tol * objective:
            result.convergence = pb.CONVERGENCE_TOLERANCE
        if on_iteration:
            on_iteration(t, objective, shift, result.convergence)
        previous, centers = objective, updated
        result.iterations_run = t + 1
        t = iterations if result.convergence else t + 1  # only the labels step remains
    result.centers = centers


def fit_resident(target, points, k, centers=None, iterations=20, tol=0.0, seed=1,
                 plain_seeding=False, labels=True, streams_per_server=1, chunk_bytes=4 << 20,
                 max_moves=3, timeout=None, log=None, *, weights=None, center_tol=None,
                 empty_clusters="keep", offset=None, init=None, n_init=1, on_iteration=None,
                 **tls):
    """Clusters the (n, d) `points` (an array, a memmap or a sparse matrix,
    densified a chunk at a time) on the replicas `target` names (as
    replica_addresses reads it), from `centers` (k, d) if given, else from
    `init` over all of them ("kmeans++" or "k-means++", the default, greedy;
    "plain-kmeans++" or `plain_seeding`; "kmeans||" or "k-means||", k-means‖
    as `kmt cluster --init='kmeans||'` runs it; "random"), for up to
    `iterations` Lloyd's steps:
    fewer once the centers stop changing, or once an iteration lowers the
    objective by at most tol times the objective (tol > 0), or once the total
    squared shift of the centers is at most `center_tol` (scikit-learn's
    rule, with center_tol = its tol times the mean variance of the points).
    `centers` of shape (r, k, d) are r starts, each run in turn.

    `weights` (n,) weigh the points (scikit-learn's sample_weight).
    `empty_clusters`: "keep" (a center without points stays) or
    "relocate-farthest" (scikit-learn's rule). `offset` (d,) is subtracted
    from every point before it is sent (the mean, for float32's precision);
    given and returned centers are the points' own coordinates. `n_init`
    runs that many initialisations from seeds seed, seed + 1, ...; of all
    runs the lowest objective is kept, and each k-means++ after the first
    loads the shards again. `on_iteration(t, objective, shift, convergence)`
    is called after each update: the objective under the centers the
    iteration started from, the total squared shift it made, and a
    pb.ConvergenceReason if the iterations stop there (else 0). `timeout`
    is each stream's deadline, `log` a function of a line of progress, `tls`
    as kmt.channel() takes it."""
    if not hasattr(points, "toarray"):
        points = np.asarray(points)
    if len(points.shape) != 2:
        raise ValueError(f"points has shape {points.shape}, expected (n, d)")
    n, d = points.shape
    if streams_per_server < 1 or iterations < 0 or tol < 0 or n_init < 1:
        raise ValueError(f"streams per server {streams_per_server}, iterations {iterations}, "
                         f"tol {tol}, n_init {n_init}: none may be negative, n_init and "
                         "streams at least 1")
    if k < 1 or n < k:
        raise ValueError(f"k = {k} needs 1 <= k <= n = {n} points")
    if empty_clusters not in ("keep", "relocate-farthest"):
        raise ValueError(f"empty_clusters '{empty_clusters}': expected keep or "
                         "relocate-farthest")
    init = init_name(init or ("plain-kmeans++" if plain_seeding else "kmeans++"),
                     ("kmeans++", "plain-kmeans++", "kmeans||", "random"))
    if weights is not None:
        weights = np.asarray(weights, dtype=np.float32).reshape(-1)
        if len(weights) != n:
            raise ValueError(f"weights has {len(weights)} values for {n} points")
    if offset is not None:
        offset = np.asarray(offset)
    servers = replica_addresses(target)
    job = _Job(servers, points, weights, dense_rows(points, offset), streams_per_server,
               chunk_bytes, max_moves, timeout, log, tls)
    try:
        job.load_all()
        best = None
        restarts = []
        given = None if centers is None else np.asarray(centers).reshape(-1, k, d)
        for r in range(n_init if given is None else len(given)):
            if given is not None:
                start = given[r] if offset is None else given[r] - offset
            else:
                if r > 0 and init != "random":
                    job.reload_all()
                start = _initial_centers(job, d, k, init, restart_seed(seed, r), log)
            result = ResidentResult(centers=None, labels=None, objective=0.0,
                                    initial_objective=0.0, objectives=[], iterations_run=0,
                                    shards=len(job.shards), shard_moves=0)
            _lloyd(job, np.array(start, dtype=np.float32).reshape(k, d), k, iterations, tol,
                   center_tol, empty_clusters == "relocate-farthest", labels, on_iteration, log,
                   result)
            restarts.append(result.objective)
            if best is None or result.objective < best.objective:
                best = result
                best.best_restart = r
        if len(restarts) > 1:
            best.restart_objectives = restarts
        if offset is not None:
            best.centers = best.centers.astype(offset.dtype) + offset
        best.shard_moves = job.moves
        return best
    finally:
        job.close()
