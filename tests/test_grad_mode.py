"""Grad mode: set_grad_enabled / no_grad / enable_grad / inference_mode as calls, context
managers and decorators, always restoring the previous mode, and per thread."""
import threading

import pytest

import minidl as md


@pytest.fixture(autouse=True)
def grad_mode_is_restored():
    yield
    assert md.is_grad_enabled(), "a test left grad mode switched off"
    md.set_grad_enabled(True)


def _records():
    return (md.ones(2, requires_grad=True) * 2).requires_grad


def test_set_grad_enabled_as_a_function_switches_now():
    md.set_grad_enabled(False)
    try:
        assert not md.is_grad_enabled() and not _records()
    finally:
        md.set_grad_enabled(True)
    assert md.is_grad_enabled() and _records()


def test_set_grad_enabled_as_a_context_manager_restores_the_previous_mode():
    with md.set_grad_enabled(False):
        assert not md.is_grad_enabled() and not _records()
        with md.set_grad_enabled(True):
            assert _records()
        assert not md.is_grad_enabled()
    assert md.is_grad_enabled()


def test_set_grad_enabled_restores_the_mode_when_the_body_raises():
    with pytest.raises(ZeroDivisionError):
        with md.set_grad_enabled(False):
            1 / 0
    assert md.is_grad_enabled()


def test_set_grad_enabled_as_a_decorator_applies_only_inside_the_call():
    @md.set_grad_enabled(False)
    def f():
        return md.is_grad_enabled(), _records()

    assert md.is_grad_enabled()          # decorating switched nothing
    assert f() == (False, False)
    assert md.is_grad_enabled()
    with md.no_grad():
        @md.set_grad_enabled(True)
        def g():
            return md.is_grad_enabled()
        assert g() is True and not md.is_grad_enabled()


def test_set_grad_enabled_wants_a_bool():
    with pytest.raises(TypeError, match="bool"):
        md.set_grad_enabled(1)
    assert md.is_grad_enabled()


def test_no_grad_and_enable_grad_decorate_with_or_without_parentheses():
    @md.no_grad
    def bare():
        return md.is_grad_enabled()

    @md.no_grad()
    def called():
        return md.is_grad_enabled()

    assert bare() is False and called() is False and md.is_grad_enabled()
    with md.no_grad():
        @md.enable_grad
        def on():
            return _records()
        assert on() is True and not md.is_grad_enabled()


def test_a_decorated_function_can_call_itself():
    @md.no_grad()
    def depth(n):
        assert not md.is_grad_enabled()
        return 0 if n == 0 else 1 + depth(n - 1)

    assert depth(3) == 3 and md.is_grad_enabled()


def test_decorated_generators_run_each_step_in_the_mode():
    @md.no_grad()
    def gen():
        for _ in range(2):
            yield md.is_grad_enabled()

    it = gen()
    assert next(it) is False
    assert md.is_grad_enabled()          # the caller's mode between steps
    assert next(it) is False
    assert list(it) == []


def test_inference_mode_records_nothing_and_restores():
    with md.inference_mode():
        assert not md.is_grad_enabled() and md.is_inference_mode_enabled() and not _records()
        with md.inference_mode(False):
            assert md.is_grad_enabled() and not md.is_inference_mode_enabled()
    assert md.is_grad_enabled() and not md.is_inference_mode_enabled()


def test_inference_mode_as_a_decorator():
    @md.inference_mode()
    def f():
        return md.is_grad_enabled(), md.is_inference_mode_enabled()

    @md.inference_mode
    def g():
        return md.is_grad_enabled()

    assert f() == (False, True) and g() is False
    assert md.is_grad_enabled() and not md.is_inference_mode_enabled()


def test_grad_mode_is_per_thread():
    seen = {}

    def worker():
        seen["starts_enabled"] = md.is_grad_enabled()
        md.set_grad_enabled(False)
        seen["switched"] = md.is_grad_enabled()

    with md.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert not md.is_grad_enabled()   # the worker's switch did not reach this thread
    assert seen == {"starts_enabled": True, "switched": False}


def test_backward_leaves_the_mode_as_it_was():
    x = md.ones(2, requires_grad=True)
    (x * x).sum().backward()
    assert md.is_grad_enabled()
    with md.no_grad():
        with md.enable_grad():
            y = (x * x).sum()
        y.backward()
        assert not md.is_grad_enabled()


def test_modes_agree_with_pytorch():
    torch = pytest.importorskip("torch")
    for lib in (torch, md):
        with lib.no_grad():
            with lib.inference_mode(False):
                assert lib.is_grad_enabled()
        with lib.set_grad_enabled(False):
            assert not lib.is_grad_enabled()
        assert lib.is_grad_enabled()
