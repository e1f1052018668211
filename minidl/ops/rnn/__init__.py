"""Recurrent layers as Functions over whole sequences (the loop over time inside one op), and the
packed layout of variable-length batches. One file per cell; the shared loop is ``_loop``."""
from ._loop import IMPLEMENTATIONS, get_implementation, implementation, set_implementation  # noqa: F401
from .gru import GRU_GATES, GRULayer, gru_step_backward_reference, gru_step_forward_reference  # noqa: F401
from .lstm import LSTM_GATES, LSTMLayer, lstm_step_backward_reference, lstm_step_forward_reference  # noqa: F401
from .packing import Pack, PadSequences, Unpack, batch_sizes_of, packed_index  # noqa: F401
from .rnn_cell import RNN_GATES, RNNLayer, rnn_step_backward_reference, rnn_step_forward_reference  # noqa: F401
