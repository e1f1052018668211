"""Recurrent layers as Functions over whole sequences (the loop over time inside one op), and the
packed layout of variable-length batches. One file per cell; the shared loop is ``_loop``."""
from ._loop import IMPLEMENTATIONS, get_implementation, implementation, set_implementation  # noqa: F401
from .gru import GRULayer, gru_step_backward, gru_step_forward  # noqa: F401
from .lstm import LSTMLayer, lstm_step_backward, lstm_step_forward  # noqa: F401
from .packing import Pack, PadSequences, Unpack, batch_sizes_of, packed_index  # noqa: F401
from .rnn_cell import RNNLayer, rnn_step_backward, rnn_step_forward  # noqa: F401
