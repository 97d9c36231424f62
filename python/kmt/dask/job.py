"""A kmt.dask fit's shards as the client sees them: the shards the resident
driver (client/resident_job.h, through kmt._driver.drive) runs its steps
on, with Dask workers in between.

Every non-empty block of the dask array is one shard, loaded by the worker
Dask runs its load task on (where the block is), on replica i mod R at first.
A round is one task per worker holding shards; the answers come back in block
order, so sums added in that order give the same bits wherever the shards
are. A shard whose worker died (Dask runs the task on another worker, which
answers `missing`) or whose replica failed (`failed`: it died, or it was
drained and ended the stream UNAVAILABLE; that replica is not used again)
is loaded again, its block recomputed by Dask if it was lost, and asked the
same step again: the result does not change. A replica that fails the load
in turn is given up for its own failure, which the fit's error names when
no replica is left; a shard moved more than the C++ client's budget allows
(ReplicaShardOptions.max_moves) fails the fit. Which failures are the
replica's is the C++ stream's rule (client/shard_stream.h, ReplicaGone):
other codes (RESOURCE_EXHAUSTED among them: the replica is up and says why)
are the fit's errors."""
import collections
import uuid

import grpc
import numpy as np
import scipy.sparse as sp
from dask import delayed

from .. import resident
from ..client import ServiceError, pb, status_code
from . import worker


class _Shard:
    def __init__(self, block, first, count, replica, worker):
        self.block, self.first, self.count = block, first, count
        self.replica, self.worker = replica, worker
        self.moves = 0  # times it was loaded again after a failure
        # The seeding steps that took centers into its distances, as the
        # C++ client keeps them (kmt._driver.replays_of), serialized, to
        # replay
        self.replays = []


def is_sparse(X):
    """Whether the dask array X's blocks are scipy.sparse matrices (its
    meta, a block of none of its rows, says so): its shards are sparse."""
    return sp.issparse(getattr(X, "_meta", None))


class DaskJob:
    """The shards of one fit of an (n, d) dask array `X` (chunked by rows
    only), weighted by the dask array `weights` (chunked as X) or not, over
    the replicas `servers`, driven from the Dask client `client`; sparse
    shards if X's blocks are scipy.sparse (is_sparse)."""

    def __init__(self, client, X, weights, offset, servers, chunk_bytes, timeout, tls, log):
        self.client, self.servers, self.log = client, servers, log
        self.blocks = X.to_delayed(optimize_graph=False).ravel()
        self.weight_blocks = (None if weights is None
                              else weights.to_delayed(optimize_graph=False).ravel())
        self.weighted = weights is not None
        self.dtype = X.dtype
        self.spec = worker.FitSpec(uuid.uuid4().hex, X.shape[1], offset, chunk_bytes, timeout,
                                   tuple(sorted(tls.items())), X.dtype == np.float64,
                                   is_sparse(X))
        self.alive = [True] * len(servers)
        self.shards = []
        self.moves = 0          # shards loaded again after their worker or replica failed
        self.label_sets = []    # label futures, per shard, of each step that asked, in order
        self.total_weight = 0.0
        self.block_counts = None  # points per block, once loaded

    def _load(self, shards_and_blocks):
        """Loads blocks, each (shard or None, block, first, replica), all at
        once; the load answers in the same order."""
        tasks = []
        for shard, block, _, replica in shards_and_blocks:
            weights = None if self.weight_blocks is None else self.weight_blocks[block]
            tasks.append(delayed(worker.load, pure=False)(
                self.spec, self.blocks[block], block, weights, self.servers[replica],
                shard.replays if shard else []))
        futures = self.client.compute(tasks)
        try:
            return self.client.gather(futures)
        finally:
            # Not kept: Dask would run a load again if its worker died.
            del futures

    def load_all(self):
        """Loads every block; returns n, the number of points."""
        blocks = range(len(self.blocks))
        answers = self._load([(None, b, 0, b % len(self.servers)) for b in blocks])
        first = 0
        self.block_counts = [a[2] for a in answers]
        for b, (status, address, count, total) in enumerate(answers):
            self.total_weight += total
            if count == 0:
                continue
            shard = _Shard(b, first, count, b % len(self.servers), address)
            first += count
            self.shards.append(shard)
            if status != "ok":
                self._failed(shard, status)
        self._reload([s for s in self.shards if s.worker is None])
        return first

    def reload_all(self):
        """Every shard loaded afresh, for a new k-means++ (only a new stream
        starts from no chosen center)."""
        self._release()
        for shard in self.shards:
            shard.replays = []
            shard.worker = None
        self._reload(self.shards)

    def _failed(self, shard, status):
        """A shard's replica failed (status ("failed", code, message)): the
        replica is taken as gone, and the shard goes to the live replica with
        the fewest shards."""
        _, code, message = status
        self.alive[shard.replica] = False
        live = [r for r in range(len(self.servers)) if self.alive[r]]
        if not live:
            # UNAVAILABLE whatever the last stream ended with, as the C++
            # driver says it: a stream opened as its replica's drain begins
            # ends CANCELLED, which would read as the caller's cancellation.
            raise ServiceError(grpc.StatusCode.UNAVAILABLE,
                               f"block {shard.block}: no replica left: {code.name}: {message}")
        self._moved(shard, f"{code.name}: {message}")
        load = collections.Counter(s.replica for s in self.shards)
        if self.log:
            self.log(f"block {shard.block}: {self.servers[shard.replica]} failed "
                     f"({code.name}: {message}); loading it on another replica")
        shard.replica = min(live, key=lambda r: load[r])
        shard.worker = None

    @staticmethod
    def _moved(shard, why):
        """Counts a move of the shard (its worker or replica failed: `why`)
        against the budget the C++ client gives a shard
        (ReplicaShardOptions.max_moves): past it, the fit fails UNAVAILABLE."""
        shard.moves += 1
        if shard.moves > resident.driver().MAX_MOVES:
            raise ServiceError(grpc.StatusCode.UNAVAILABLE,
                               f"block {shard.block}: gave up after {shard.moves - 1} moves of "
                               f"this shard: {why}")

    def _reload(self, shards):
        """Loads the shards whose worker is None until each is held (each
        failure a move, within the budget)."""
        while shards:
            self.moves += len(shards)
            answers = self._load([(s, s.block, s.first, s.replica) for s in shards])
            for shard, (status, address, _, _) in zip(shards, answers):
                shard.worker = address
                if status != "ok":
                    self._failed(shard, status)
            shards = [s for s in shards if s.worker is None]

    def _release(self):
        self.client.run(worker.release, self.spec.fit_id, on_error="ignore")

    def close(self):
        """Ends the fit's streams on every worker."""
        self._release()

    # The driver's side of the shards (kmt._driver.drive).

    def sizes(self):
        """Points per shard, in order."""
        return [shard.count for shard in self.shards]

    def labels_stay(self):
        """An assign step's labels stay on the workers (label_sets)."""
        return True

    def restart(self):
        """Every shard loaded afresh, for a new k-means++."""
        self.reload_all()

    def round(self, requests):
        """One step: serialized JobRequests per shard (None: not asked), the
        serialized JobResponses in shard order (empty where not asked)."""
        # The driver serializes each shard's request apart: the same bytes
        # (an assign step's centers) become one request, sent once per
        # worker, not once per shard.
        parsed = {r: pb.JobRequest.FromString(r) for r in set(requests) if r is not None}
        answers = self._round([None if r is None else parsed[r] for r in requests])
        # Each shard keeps the step for a reload to replay, if it is one to
        # keep; one that failed the step and was loaded again before it was
        # asked again has it once, as the others.
        kept = {r: resident.driver().replays_of(r) for r in parsed}
        for shard, r in zip(self.shards, requests):
            if r is not None:
                shard.replays.extend(kept[r])
        return [a.SerializeToString() for a in answers]

    def _round(self, requests):
        """One request per shard (none where None), one task per worker; the
        answers (JobResponses) in shard order. A step that asks for labels
        leaves them on the workers (appended to self.label_sets)."""
        answers = [pb.JobResponse() for _ in self.shards]
        pending = [s for s, r in enumerate(requests) if r is not None]
        keep = any(requests[s].HasField("assign") and requests[s].assign.return_labels
                   for s in pending)
        labels = {}
        # Each shard asked again was moved, within the budget.
        while pending:
            pending = self._ask(requests, pending, answers, keep, labels)
        if keep:
            self.label_sets.append([labels[s] for s in range(len(self.shards))])
        return answers

    def _ask(self, requests, pending, answers, keep, labels):
        """Asks the pending shards once; fills their answers (and label
        futures); returns the shards to ask again, loaded again."""
        # Per worker, each distinct request once (an assign step's is the
        # same for every shard).
        distinct = collections.defaultdict(list)
        index, by_worker = {}, collections.defaultdict(list)
        for s in pending:
            w, r = self.shards[s].worker, requests[s]
            if (w, id(r)) not in index:
                index[(w, id(r))] = len(distinct[w])
                distinct[w].append(r.SerializeToString())
            by_worker[w].append((self.shards[s].block, index[(w, id(r))]))
        # Loosely bound to the worker holding the shards: if it is gone, Dask
        # runs the task on another one, which answers that it holds nothing.
        futures = {w: self.client.submit(worker.step, self.spec, distinct[w], asked, keep,
                                         workers=[w], allow_other_workers=True, pure=False)
                   for w, asked in by_worker.items()}
        if keep:
            gathered = self.client.gather(
                {w: self.client.submit(worker.answers_of, f, workers=[w],
                                       allow_other_workers=True, pure=False)
                 for w, f in futures.items()})
        else:
            gathered = {w: stepped[0] for w, stepped in self.client.gather(futures).items()}
        by_block = {self.shards[s].block: s for s in pending}
        again = []
        for w, stepped in gathered.items():
            for block, status in stepped.items():
                s = by_block[block]
                shard = self.shards[s]
                if status[0] == "ok":
                    r = pb.JobResponse.FromString(status[1])
                    if r.HasField("error"):
                        raise ServiceError(status_code(r.error.code),
                                           f"block {block} on {self.servers[shard.replica]}: "
                                           f"{r.error.message}")
                    answers[s] = r
                    if keep:
                        labels[s] = self.client.submit(worker.labels_of, futures[w], block,
                                                       workers=[w], allow_other_workers=True,
                                                       pure=False)
                    continue
                if status[0] == "error":
                    raise ServiceError(status[1], f"block {block} on "
                                                  f"{self.servers[shard.replica]}: {status[2]}")
                if status[0] == "missing":
                    if self.log:
                        self.log(f"block {block}: its worker {shard.worker} is gone; loading it "
                                 "again")
                    self._moved(shard, f"its worker {shard.worker} is gone")
                    shard.worker = None
                else:
                    self._failed(shard, status)
                again.append(s)
        self._reload([self.shards[s] for s in again])
        return sorted(again)

    def all_weights(self):
        """The weights of every point, on the client (for the weighted
        'random' init)."""
        return np.concatenate(self.client.gather(self.client.compute(
            [delayed(np.asarray)(self.weight_blocks[s.block],
                                 dtype=np.float64 if self.spec.float64 else np.float32)
             for s in self.shards])))
