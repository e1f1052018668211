"""DataLoader worker processes (``num_workers > 0``).

Each worker is a process with its own copy of the dataset. The main process sends it tasks
(epoch, task number, indices) on the worker's own queue, round-robin, keeping
``prefetch_factor`` tasks per worker in flight; the worker fetches and collates the batch and
sends it back, pickled, on the shared result queue; the main process yields the batches in
task order, so the result is the same batches in the same order as with ``num_workers=0``.

- Seeds: worker i seeds Python's ``random`` and minidl's generator with ``base_seed + i``
  (and NumPy's legacy global generator from both), ``base_seed`` being drawn once per
  iterator from the loader's generator, as PyTorch does; ``get_worker_info()`` tells the
  dataset (or ``worker_init_fn``) which worker it is in.
- Errors: an exception in a worker (in ``__getitem__``, collate or ``worker_init_fn``) is sent
  back and raised in the main process as the same type, with the worker's traceback in the
  message. A worker that dies, or a batch that takes more than ``timeout`` seconds, raises
  RuntimeError instead of hanging.
- Shutdown: when an epoch ends (unless ``persistent_workers``), when the iterator is garbage
  collected, or at exit; a worker also exits if the main process is gone.
"""
import itertools
import os
import pickle
import queue
import random as py_random
import signal
import time
import traceback
import weakref

import numpy as np

from ... import random
from .fetch import make_fetcher

_POLL_S = 0.5     # how often a waiting side checks that the other is still alive
_worker_info = None


class WorkerInfo:
    """What ``get_worker_info()`` gives inside a worker: id, num_workers, seed, dataset."""

    def __init__(self, id, num_workers, seed, dataset):   # noqa: A002 (PyTorch's name)
        self.id, self.num_workers, self.seed, self.dataset = id, num_workers, seed, dataset

    def __repr__(self):
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, dataset={self.dataset!r})"


def get_worker_info():
    """This worker's WorkerInfo inside a DataLoader worker process; None in the main process."""
    return _worker_info


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process and raised there."""

    def __init__(self, exc, where):
        self.exc_type = type(exc)
        try:
            pickle.dumps(self.exc_type)
        except Exception:   # a class defined in a function: the main process could not load it
            self.exc_type = RuntimeError
        self.exc_msg = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.where = where

    def reraise(self):
        msg = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.exc_msg}"
        try:
            exc = self.exc_type(msg)
        except Exception:    # an exception type whose constructor wants other arguments
            raise RuntimeError(msg) from None
        raise exc


def _seed_worker(base_seed, worker_id):
    seed = base_seed + worker_id
    py_random.seed(seed)
    random.manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    return seed


def worker_loop(iterable, dataset, index_queue, result_queue, done_event, auto_collation, collate_fn, batch_size,
                drop_last, base_seed, worker_init_fn, worker_id, num_workers, parent_pid):
    """The body of worker process ``worker_id``."""
    global _worker_info
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the main process handles Ctrl-C and shuts us down
    signal.signal(signal.SIGTERM, signal.SIG_DFL)    # not a handler inherited from the main process
    result_queue.cancel_join_thread()                # exiting never waits for the main process to read
    where = f"in DataLoader worker process {worker_id}"
    seed = _seed_worker(base_seed, worker_id)
    _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)

    def start():
        return make_fetcher(iterable, dataset, auto_collation, collate_fn, batch_size, drop_last)
    fetcher, failure = None, None
    try:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
        fetcher = start()
    except Exception as exc:
        failure = ExceptionWrapper(exc, where)
    ended = False
    while True:
        try:
            message = index_queue.get(timeout=_POLL_S)
        except queue.Empty:
            if os.getppid() != parent_pid:    # the main process died
                return
            continue
        if message is None:
            return
        if message[0] == "resume":           # persistent workers: a new epoch
            ended = False
            if failure is None:
                try:
                    fetcher = start()
                except Exception as exc:
                    failure = ExceptionWrapper(exc, where)
            continue
        epoch, task, index = message
        if done_event.is_set() or ended:
            continue
        if failure is not None:
            reply = ("error", failure)
        else:
            try:
                reply = ("ok", pickle.dumps(fetcher.fetch(index), protocol=pickle.HIGHEST_PROTOCOL))
            except StopIteration as exc:
                if iterable:
                    reply, ended = ("end", None), True
                else:
                    reply = ("error", ExceptionWrapper(exc, where))
            except Exception as exc:
                reply = ("error", ExceptionWrapper(exc, where))
        result_queue.put((epoch, task, worker_id) + reply)


def _shutdown(workers, index_queues, result_queue, done_event, owner_pid):
    if os.getpid() != owner_pid:
        # a forked copy of the iterator (in another loader's worker, say) being collected: the
        # workers and the shared event belong to the process that started them; leave them be
        return
    done_event.set()
    for q in index_queues:
        try:
            q.put(None)
        except (OSError, ValueError):
            pass
    for w in workers:
        w.join(timeout=5)
        if w.is_alive():
            w.terminate()
            w.join(timeout=1)
    for q in index_queues + [result_queue]:
        q.cancel_join_thread()
        q.close()


class MultiProcessIterator:
    def __init__(self, loader):
        self._loader = loader
        n = loader.num_workers
        ctx = loader._multiprocessing_context()
        self._iterable = loader._iterable
        self._in_flight = loader.prefetch_factor * n
        base_seed = loader._draw_base_seed()
        self._result_queue = ctx.Queue()
        done_event = ctx.Event()
        self._index_queues, self._workers = [], []
        for i in range(n):
            q = ctx.Queue()
            w = ctx.Process(target=worker_loop, daemon=True, args=(
                self._iterable, loader.dataset, q, self._result_queue, done_event, loader._auto_collation,
                loader.collate_fn, loader.batch_size, loader.drop_last, base_seed, loader.worker_init_fn, i, n,
                os.getpid()))
            w.start()
            self._index_queues.append(q)
            self._workers.append(w)
        self._shutdown = weakref.finalize(self, _shutdown, self._workers, self._index_queues, self._result_queue,
                                          done_event, os.getpid())
        self._epoch = -1
        self._reset()

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def _reset(self):
        """Start an epoch (again, with persistent workers)."""
        self._epoch += 1
        if self._epoch > 0:
            for q in self._index_queues:
                q.put(("resume",))
        self._sampler_iter = itertools.repeat(None) if self._iterable else iter(self._loader._index_sampler)
        self._sampler_done = False
        self._sent = self._taken = 0
        self._worker_of = {}            # task -> the worker it went to
        self._results = {}              # task -> (kind, payload), received but not yet yielded
        self._active = [True] * len(self._workers)   # an iterable dataset's worker is done at its end
        self._turn = itertools.cycle(range(len(self._workers)))
        for _ in range(self._in_flight):
            self._send_next()

    def _send_next(self):
        if self._sampler_done or not any(self._active):
            return
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            self._sampler_done = True
            return
        worker = next(w for w in self._turn if self._active[w])
        self._index_queues[worker].put((self._epoch, self._sent, index))
        self._worker_of[self._sent] = worker
        self._sent += 1

    def __next__(self):
        while True:
            # tasks an exhausted worker will never answer are skipped
            while (self._taken < self._sent and self._taken not in self._results
                   and not self._active[self._worker_of[self._taken]]):
                del self._worker_of[self._taken]
                self._taken += 1
            if self._taken >= self._sent:
                if not self._loader.persistent_workers:
                    self._shutdown()
                raise StopIteration
            if self._taken not in self._results:
                self._receive()
                continue
            kind, payload = self._results.pop(self._taken)
            del self._worker_of[self._taken]
            self._taken += 1
            self._send_next()
            if kind == "ok":
                return pickle.loads(payload)
            if kind == "error":
                if not self._loader.persistent_workers:
                    self._shutdown()
                payload.reraise()

    def _receive(self):
        """Wait for one result of this epoch; a dead worker or the loader's timeout raises."""
        timeout = self._loader.timeout
        start = time.monotonic()
        while True:
            try:
                epoch, task, worker, kind, payload = self._result_queue.get(timeout=_POLL_S)
            except queue.Empty:
                dead = [w for w in self._workers if not w.is_alive()]
                if dead:
                    self._shutdown()
                    codes = ", ".join(f"pid {w.pid}: exit code {w.exitcode}" for w in dead)
                    raise RuntimeError(f"DataLoader worker exited unexpectedly ({codes})") from None
                if timeout > 0 and time.monotonic() - start > timeout:
                    self._shutdown()
                    raise RuntimeError(f"DataLoader timed out after {timeout} seconds") from None
                continue
            if epoch != self._epoch:     # from an epoch left before its end
                continue
            if kind == "end":
                self._active[worker] = False
            self._results[task] = (kind, payload)
            return
