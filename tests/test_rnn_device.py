"""The recurrent layers run on the CPU only: a module moved to "cuda", or given input there, says
so by name (NotImplementedError) instead of failing inside its loop over time."""
import pytest

import minidl as md
import minidl.nn as nn
from minidl import backends
from minidl.cli import main

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

LAYERS = {
    "RNN": (lambda: nn.RNN(3, 4), (5, 2, 3)),
    "LSTM": (lambda: nn.LSTM(3, 4, num_layers=2), (5, 2, 3)),
    "GRU": (lambda: nn.GRU(3, 4, bidirectional=True), (5, 2, 3)),
    "RNNCell": (lambda: nn.RNNCell(3, 4), (2, 3)),
    "LSTMCell": (lambda: nn.LSTMCell(3, 4), (2, 3)),
    "GRUCell": (lambda: nn.GRUCell(3, 4), (2, 3)),
    "LayerNormLSTM": (lambda: nn.LayerNormLSTM(3, 4), (5, 2, 3)),
    "BatchNormLSTM": (lambda: nn.BatchNormLSTM(3, 4), (5, 2, 3)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_a_layer_moved_to_cuda_refuses_by_name(name):
    make, shape = LAYERS[name]
    m = make().cuda()
    with pytest.raises(NotImplementedError, match=f"^{name}: the recurrent layers run on the CPU only; .* is on cuda"):
        m(md.randn(*shape, device="cuda"))


@pytest.mark.parametrize("name", ["LSTM", "GRUCell", "LayerNormLSTM"])
def test_cuda_input_to_a_cpu_layer_refuses_by_name(name):
    make, shape = LAYERS[name]
    with pytest.raises(NotImplementedError, match=f"^{name}: .*input is on cuda"):
        make()(md.randn(*shape, device="cuda"))


def test_train_lstm_on_cuda_is_a_one_line_argument_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["train", "lstm", "--steps", "1", "--device", "cuda"])
    assert exc.value.code == 2
    assert "--device cuda: the lstm runs on the CPU only" in capsys.readouterr().err.strip().splitlines()[-1]
