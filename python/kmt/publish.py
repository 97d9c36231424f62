"""kmt.ModelPublisher: an online model's centers published as the versions of
a served fitted model, so that the clients that label points by its name
(kmt.ServedModel) follow a model that keeps learning, without a restart.

    model = kmt.MiniBatchKMeans(16, half_life=20, server=address)
    publisher = kmt.ModelPublisher("models", "live", every_batches=50)
    for batch in stream:
        model.partial_fit(batch)
        publisher.offer(model)          # version 1, 2, ... every 50 batches

Each version is DIR/NAME/VERSION/model.kmt (save_model's fitted model file),
its directory made under another name and renamed into place whole; a
kmt-server whose --model_dir is DIR loads it at its next poll and serves it
as NAME's default version, and its --keep_versions retires the old ones.
"""
import os
import shutil
import time


class ModelPublisher:
    """Writes an estimator's fitted centers as the next version of `name`
    under `directory`: when asked (publish), or every `every_batches` calls
    of offer and/or every `every_seconds` seconds of them (offer publishes
    on its first call and whenever either is due). Versions count up from one
    past the highest already in DIR/NAME, so a restarted publisher goes on
    where the last one stopped."""

    def __init__(self, directory, name, *, every_batches=None, every_seconds=None):
        if not name or os.sep in name or name.startswith("."):
            raise ValueError(f"model name {name!r}: must be a non-empty file name")
        for label, every in (("every_batches", every_batches), ("every_seconds", every_seconds)):
            if every is not None and not every > 0:
                raise ValueError(f"{label}={every!r}: must be positive (or None)")
        self.directory = directory
        self.name = name
        self.every_batches = every_batches
        self.every_seconds = every_seconds
        self.version = None  # the last version published, if any
        self._offers = 0
        self._published_at = None

    def _next_version(self):
        model_dir = os.path.join(self.directory, self.name)
        taken = [int(v) for v in os.listdir(model_dir) if v.isdigit()] if os.path.isdir(
            model_dir) else []
        return max(taken, default=0) + 1

    def publish(self, estimator, X=None):
        """Writes the estimator's centers as the next version now (`X`, if
        given, recorded as the points it was fitted on); returns the
        version."""
        version = self._next_version()
        model_dir = os.path.join(self.directory, self.name)
        # The version's directory is made under a name the server skips (not
        # a number) and renamed into place whole, so a poll never finds it
        # without its file.
        staging = os.path.join(model_dir, f".{version}.{os.getpid()}.tmp")
        estimator.save_model(os.path.join(staging, "model.kmt"), name=self.name, X=X)
        try:
            os.rename(staging, os.path.join(model_dir, str(version)))
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self.version = version
        self._offers = 0
        self._published_at = time.monotonic()
        return version

    def offer(self, estimator):
        """Counts one batch of the estimator's and publishes it if a version
        is due; returns the version published, or None."""
        if self.every_batches is None and self.every_seconds is None:
            raise ValueError("offer needs every_batches or every_seconds; publish() publishes "
                             "when asked")
        self._offers += 1
        due = self.version is None
        if self.every_batches is not None and self._offers >= self.every_batches:
            due = True
        if (self.every_seconds is not None and self._published_at is not None
                and time.monotonic() - self._published_at >= self.every_seconds):
            due = True
        return self.publish(estimator) if due else None
