"""Device choice: auto falls back to the CPU; an absent accelerator is a clear error; CPU flags can be masked."""
import pytest
import torch

from autoglm.platforms import device_memory, resolve_device


def test_auto_picks_an_available_device():
    device = resolve_device("auto")
    if not torch.cuda.is_available():
        assert device.type in ("cpu", "xpu", "mps")


def test_cpu_has_no_device_memory_figure():
    assert resolve_device("cpu") == torch.device("cpu")
    assert device_memory(torch.device("cpu")) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_missing_accelerator_is_a_clear_error():
    with pytest.raises(ValueError, match="'cuda:0' is not available on this machine"):
        resolve_device("cuda:0")


def test_half_precision_upcasts_only_where_the_cpu_would_emulate_it(monkeypatch):
    from autoglm import platforms

    cpu = torch.device("cpu")
    monkeypatch.setattr(platforms, "_cpu_flags", lambda: frozenset({"avx512f"}))
    assert platforms.compute_dtype(torch.bfloat16, cpu, upcast_half_on_cpu=True) == torch.float32
    assert platforms.compute_dtype(torch.bfloat16, cpu, upcast_half_on_cpu=False) == torch.bfloat16
    assert platforms.compute_dtype(torch.float32, cpu, upcast_half_on_cpu=True) == torch.float32
    monkeypatch.setattr(platforms, "_cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert platforms.compute_dtype(torch.bfloat16, cpu, upcast_half_on_cpu=True) == torch.bfloat16
    assert platforms.compute_dtype(torch.float16, cpu, upcast_half_on_cpu=True) == torch.float32


def test_disabled_cpu_flags_are_treated_as_absent_and_logged(monkeypatch, caplog):
    from autoglm import platforms

    monkeypatch.setattr(platforms, "reported_cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16", "amx_bf16"}))
    monkeypatch.setenv(platforms.CPU_DISABLE_FLAGS_ENV, "avx512_bf16, amx_bf16")
    platforms._cpu_flags.cache_clear()
    try:
        with caplog.at_level("WARNING", logger="autoglm.platforms"):
            assert not platforms.cpu_has_native_matmul(torch.bfloat16)
        assert platforms.cpu_has_flags("avx512f") and not platforms.cpu_has_flags("amx_bf16")
        assert "treating this CPU as lacking amx_bf16, avx512_bf16" in caplog.text
        monkeypatch.delenv(platforms.CPU_DISABLE_FLAGS_ENV)
        platforms._cpu_flags.cache_clear()
        assert platforms.cpu_has_native_matmul(torch.bfloat16)
    finally:
        platforms._cpu_flags.cache_clear()
