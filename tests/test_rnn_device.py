"""The recurrent layers on cuda (under the CUDA simulator in CI): every layer, cell, packed batch
and normalized LSTM gives the CPU's outputs and the CPU's gradients for the input, the states
and every parameter, with the step's gates in the cuda gate kernels (or the reference, when
selected). Shapes are tiny (sequence 2-3, hidden 3-4): the simulator runs each thread in Python."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
from minidl import backends
from minidl.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

try:
    backends.get("cuda")
except RuntimeError as exc:   # pragma: no cover
    pytest.skip(f"cuda device unavailable: {exc}", allow_module_level=True)

from minidl.kernels.cuda import rnn_gates as cuda_gates  # noqa: E402

ATOL = 1e-10


def _twins(make):
    """The same module (same seed) on the CPU and on cuda, float64."""
    md.manual_seed(0)
    cpu = make()
    md.manual_seed(0)
    gpu = make().to("cuda")
    return cpu, gpu


def _leaf(a, device):
    return md.tensor(a, requires_grad=True, device=device)


def _tensors(out):
    """The Tensors of a module's output, in order (tuples, PackedSequences, None dropped)."""
    if isinstance(out, PackedSequence):
        return [out.data]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _tensors(o)]
    return [] if out is None else [out]


def compare(make, arrays, call=None, seed=1):
    """Run ``call(module, *tensors)`` (default: module(*tensors)) on the CPU and on cuda from the same
    float64 arrays; outputs, and the gradients of a random cotangent for every input array and every
    parameter, must agree. Returns the two modules."""
    call = call or (lambda m, *t: m(*t))
    cpu, gpu = _twins(make)
    xs_c = [_leaf(a, "cpu") for a in arrays]
    xs_g = [_leaf(a, "cuda") for a in arrays]
    outs_c, outs_g = _tensors(call(cpu, *xs_c)), _tensors(call(gpu, *xs_g))
    assert len(outs_c) == len(outs_g) > 0
    rng = np.random.default_rng(seed)
    loss_c = loss_g = 0
    for k, (c, g) in enumerate(zip(outs_c, outs_g)):
        assert g.device == "cuda" and g.shape == c.shape and g.dtype == c.dtype
        np.testing.assert_allclose(g.detach().cpu().numpy(), c.detach().cpu().numpy(), atol=ATOL, err_msg=f"output {k}")
        v = rng.standard_normal(c.shape)
        loss_c = loss_c + (c * md.tensor(v)).sum()
        loss_g = loss_g + (g * md.tensor(v, device="cuda")).sum()
    loss_c.backward()
    loss_g.backward()
    for k, (c, g) in enumerate(zip(xs_c, xs_g)):
        assert g.grad is not None and g.grad.device == "cuda", f"input {k} has no cuda gradient"
        np.testing.assert_allclose(g.grad.cpu().numpy(), c.grad.cpu().numpy(), atol=ATOL,
                                   err_msg=f"gradient of input {k}")
    params_g = dict(gpu.named_parameters())
    for name, p in cpu.named_parameters():
        q = params_g[name]
        assert q.device == "cuda" and q.grad is not None, f"{name} has no cuda gradient"
        np.testing.assert_allclose(q.grad.cpu().numpy(), p.grad.cpu().numpy(), atol=ATOL, err_msg=f"gradient of {name}")
    return cpu, gpu


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


F64 = {"dtype": "float64"}


# the layers -----------------------------------------------------------------------------------
@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
def test_rnn_with_initial_state(nonlinearity):
    compare(lambda: nn.RNN(3, 4, nonlinearity=nonlinearity, **F64), [rnd(3, 2, 3), rnd(1, 2, 4, seed=2)])


def test_lstm_two_layers_bidirectional():
    compare(lambda: nn.LSTM(2, 2, num_layers=2, bidirectional=True, **F64), [rnd(2, 2, 2)])


def test_lstm_with_projection_batch_first_and_states():
    compare(lambda: nn.LSTM(3, 4, proj_size=2, batch_first=True, **F64),
            [rnd(2, 3, 3), rnd(1, 2, 2, seed=2), rnd(1, 2, 4, seed=3)],
            call=lambda m, x, h, c: m(x, (h, c)))


def test_gru_bidirectional_without_bias():
    compare(lambda: nn.GRU(3, 4, bidirectional=True, bias=False, **F64), [rnd(3, 2, 3)])


def test_unbatched_gru():
    compare(lambda: nn.GRU(3, 3, **F64), [rnd(3, 3)])


@pytest.mark.parametrize("cell", [nn.RNNCell, nn.GRUCell])
def test_cells_with_and_without_a_state(cell):
    compare(lambda: cell(3, 4, **F64), [rnd(2, 3)])
    compare(lambda: cell(3, 4, **F64), [rnd(2, 3), rnd(2, 4, seed=2)])


def test_lstm_cell():
    compare(lambda: nn.LSTMCell(3, 4, **F64), [rnd(2, 3), rnd(2, 4, seed=2), rnd(2, 4, seed=3)],
            call=lambda m, x, h, c: m(x, (h, c)))


# packed batches ---------------------------------------------------------------------------------
def test_packed_unsorted_lstm_pads_back_and_takes_each_final_state():
    lengths = np.array([2, 3, 1])

    def run(m, x):
        packed = pack_padded_sequence(x, lengths, enforce_sorted=False)
        out, (h, c) = m(packed)
        padded, got = pad_packed_sequence(out, total_length=3)
        assert got.numpy().tolist() == lengths.tolist()
        return padded, h, c
    compare(lambda: nn.LSTM(3, 3, **F64), [rnd(3, 3, 3)], call=run)


def test_packed_sorted_bidirectional_gru():
    compare(lambda: nn.GRU(2, 3, bidirectional=True, **F64), [rnd(3, 2, 2)],
            call=lambda m, x: m(pack_padded_sequence(x, [3, 2]))[0])


# normalized LSTMs -----------------------------------------------------------------------------
def test_layer_norm_lstm():
    compare(lambda: nn.LayerNormLSTM(2, 3, **F64), [rnd(2, 2, 2)])


def test_batch_norm_lstm_trains_with_per_step_statistics_and_evaluates_with_them():
    cpu, gpu = compare(lambda: nn.BatchNormLSTM(2, 2, max_steps=2, **F64), [rnd(2, 3, 2)])
    buffers_g = dict(gpu.named_buffers())
    for name, b in cpu.named_buffers():
        np.testing.assert_allclose(buffers_g[name].cpu().numpy(), b.cpu().numpy(), atol=ATOL, err_msg=name)
    cpu.eval()
    gpu.eval()
    x = rnd(3, 2, 2, seed=5)   # one step beyond max_steps: the last step's statistics again
    np.testing.assert_allclose(gpu(md.tensor(x, device="cuda"))[0].detach().cpu().numpy(), cpu(md.tensor(x))[0].detach().numpy(),
                               atol=ATOL)


# the implementations each node runs ------------------------------------------------------------
def test_cuda_tensors_run_the_cuda_gate_kernels(monkeypatch):
    calls = []
    for name in ("lstm_step_forward", "lstm_step_backward"):
        real = getattr(cuda_gates, name)
        monkeypatch.setattr(cuda_gates, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    md.manual_seed(0)
    m = nn.LSTM(3, 3, **F64).to("cuda")
    y, _ = m(md.randn(2, 1, 3, dtype="float64", device="cuda"))
    y.sum().backward()
    assert calls == ["lstm_step_forward"] * 2 + ["lstm_step_backward"] * 2


def test_the_reference_on_cuda_gives_the_same_gradients(monkeypatch):
    monkeypatch.setattr(cuda_gates, "gru_step_forward", None)    # would fail if it were called
    with md.implementation(rnn="reference"):
        compare(lambda: nn.GRU(3, 3, **F64), [rnd(2, 2, 3)])
        compare(lambda: nn.LSTM(3, 3, **F64), [rnd(2, 2, 3)])
        compare(lambda: nn.RNN(3, 3, nonlinearity="relu", **F64), [rnd(2, 2, 3)])


def test_float32_on_cuda_is_close_to_the_cpu():
    md.manual_seed(0)
    cpu = nn.LSTM(3, 4)
    gpu = nn.LSTM(3, 4)
    gpu.load_state_dict(cpu.state_dict())
    gpu.to("cuda")
    x = rnd(3, 2, 3).astype(np.float32)
    yc, yg = cpu(md.tensor(x))[0], gpu(md.tensor(x, device="cuda"))[0]
    assert yg.dtype == np.float32
    np.testing.assert_allclose(yg.detach().cpu().numpy(), yc.detach().cpu().numpy(), atol=1e-5)


# bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, shape", [(lambda: nn.LSTM(3, 4), (2, 1, 3)), (lambda: nn.GRUCell(3, 4), (2, 3)),
                                         (lambda: nn.LayerNormLSTM(3, 4), (2, 1, 3))])
def test_input_on_another_device_than_the_parameters_names_both(make, shape):
    m = make().to("cuda")
    with pytest.raises(RuntimeError, match="Input and parameter tensors are not at the same device, found input "
                                           "tensor at cpu and parameter tensor .* at cuda(:0)?"):
        m(md.randn(*shape))


def test_state_on_another_device_than_the_input_names_both():
    m = nn.GRU(3, 4).to("cuda")
    with pytest.raises(RuntimeError, match="Input and hidden tensors are not at the same device, found input "
                                           "tensor at cuda(:0)? and hidden tensor hx.0. at cpu"):
        m(md.randn(2, 1, 3, device="cuda"), md.zeros(1, 1, 4))


# the char-LM's training step ------------------------------------------------------------------
def test_char_lstm_trains_on_cuda_as_on_the_cpu():
    from minidl import optim
    from minidl.zoo import CharLSTM
    models = []
    for device in ("cpu", "cuda"):
        md.manual_seed(0)
        m = CharLSTM(5, 2, 2, 1).to(device)
        opt = optim.Adam(m.parameters(), lr=0.1)
        x, y = np.array([[1, 2], [3, 4]]), np.array([[2, 3], [4, 0]])
        for _ in range(2):
            _, loss = m(md.tensor(x, device=device), md.tensor(y, device=device))
            opt.zero_grad()
            loss.backward()
            opt.step()
        models.append((m, float(loss.item())))
    (cpu, loss_c), (gpu, loss_g) = models
    assert abs(loss_g - loss_c) < 1e-5
    for (name, p), q in zip(cpu.named_parameters(), gpu.parameters()):
        np.testing.assert_allclose(q.detach().cpu().numpy(), p.detach().cpu().numpy(), atol=1e-5, err_msg=name)
