"""The autocast state of each thread, which ``Function.apply`` reads while autocast is on.

autocast (``minidl/amp``) changes the dtype an op computes in by casting the op's Tensor
arguments before it runs. The decision needs the op's rule (``minidl/amp/policy.py``), the
device's enabled flag and its low dtype, and the per-region cache of cast weights; all of
that is per thread, as in PyTorch, so one thread's ``with md.autocast(...)`` never changes
another's ops. The state lives here, in a module that imports nothing of minidl, because autograd
reads it on its hottest path while minidl.amp imports the ops.

While no thread has autocast enabled, ``Function.apply`` does not look at any of it: the
first thread that enables autocast has ``install_seam(True)`` give Function an apply that
checks ``state.on`` (False unless some device has autocast enabled in this thread) and, when
it is set, looks the op's class up in ``RULES`` (filled by ``minidl.amp.policy`` on import) and
hands the call to ``run``; when the last such thread disables it, the plain apply comes back.
"""
import threading


class _State(threading.local):
    def __init__(self):            # runs once in every thread that touches the state
        self.on = False            # any device enabled (and not inside an op being cast)
        self.counted = False       # whether this thread is counted in _threads_on
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = {"cpu": None, "cuda": None}   # None: the device's default, read by minidl.amp
        self.cache_enabled = True
        self.nesting = 0           # autocast regions entered and not yet left
        self.cache = {}            # (id(weight), low dtype, grad mode) -> (weight, its version, its cast)


state = _State()

# Function subclass -> {device type: rule}; filled by minidl.amp.policy on import
RULES = {}
# the op names that minidl's dtype checks use (check_same_dtype) -> {device type: rule}
RULES_BY_NAME = {}

run = None            # minidl.amp.policy.run(cls, args): the op called under its autocast rule
install_seam = None   # autograd.op_function._install_seam(on): the apply that checks state.on, or not
_threads_on = 0       # threads whose autocast is enabled now (process-wide; a thread that ends inside
                      # a region stays counted, which costs the other threads only the check)
_lock = threading.Lock()


def refresh():
    """Recompute ``state.on`` after a device's enabled flag changed in this thread, and install the
    checking apply while any thread has autocast on."""
    global _threads_on
    on = any(state.enabled.values())
    if on == state.counted:
        state.on = on
        return
    with _lock:
        _threads_on += 1 if on else -1
        state.counted = on
        state.on = on
        install_seam(_threads_on > 0)


def casts(op_name, array_device):
    """True when autocast will bring the operands of the op named ``op_name`` (on
    ``array_device``) to one dtype before it runs, so its dtype check may let mixed dtypes pass."""
    rules = RULES_BY_NAME.get(op_name)
    return rules is not None and state.enabled.get(array_device, False) and rules.get(array_device) is not None
