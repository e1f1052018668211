"""Mixed precision, as ``torch.amp``: autocast regions (``autocast_mode.py``, with the op
policy in ``policy.py``), autocast for a user's Function (``custom_function.py``: custom_fwd,
custom_bwd) and loss scaling for float16 training (``grad_scaler.py``)."""
from .autocast_mode import (autocast, autocast_decrement_nesting, autocast_increment_nesting, clear_autocast_cache,
                            get_autocast_dtype, is_autocast_available, is_autocast_cache_enabled, is_autocast_enabled,
                            set_autocast_cache_enabled, set_autocast_dtype, set_autocast_enabled)
from .custom_function import custom_bwd, custom_fwd
from .grad_scaler import GradScaler, OptState
