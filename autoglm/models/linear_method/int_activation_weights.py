"""int8/int4 weights in the layout the int8-activation kernel streams, and the same math in PyTorch.

The kernel (``kernels/int8_activation_linear.cpp``) multiplies unsigned weight bytes by signed int8
activations with ``vpdpbusd``, so the weights are stored offset to unsigned: int8 as ``q + 128``, one byte
each; int4 as ``q + 8``, two a byte, each 128 columns as 64 bytes whose low nibbles are the first 64
columns and high nibbles the next 64 (a last 64 columns: 32 bytes, halves of 32), so two masks and a shift
widen 128 weights in registers. Four neighbouring output rows are interleaved 64 bytes at a time (32 for
the int4 tail), so the kernel's tile of four reads one sequential stream; rows are padded to a multiple
of four. Scales are bfloat16, one per group of columns, ``[out, groups]``.

Activations are quantized per row (token): symmetric, ``scale = max|x| / 127``, ``q = round(x / scale)``
in float32, ties to even, exactly as the kernel does; :func:`int_a8_reference_linear` is the product of
those and the dequantized weight, the path wherever the kernel does not run.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from autoglm.models.linear_method.int_weights import dequantize

ACTIVATION_LEVELS = 127  # activations in [-127, 127]: symmetric, so zero stays zero
KERNEL_COLUMN_MULTIPLE = 64  # the kernel reads 64 columns per instruction
_OFFSETS = {8: 128, 4: 8}
_NIBBLE_BLOCK = 128  # columns of int4 stored as one 64-byte block
_TILE_ROWS = 4  # output rows interleaved
_UNIT_BYTES = 64  # bytes of one row before the next row's


def kernel_takes(in_features: int, group_size: int) -> bool:
    """Whether the kernel multiplies a layer of this width and group size: 64-column steps, and groups of 32
    (two in one step) or whole steps."""
    return in_features % KERNEL_COLUMN_MULTIPLE == 0 and (group_size == 32 or group_size % KERNEL_COLUMN_MULTIPLE == 0)


def pack_int_a8(q: torch.Tensor, scale: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(packed, scales)`` in the kernel's layout from ``q [out, in]`` (int8 storage) and ``scale [out, groups]``."""
    unsigned = (q.to(torch.int16) + _OFFSETS[bits]).to(torch.uint8)
    if bits == 4:
        unsigned = _pack_nibbles(unsigned)
    padding = -unsigned.shape[0] % _TILE_ROWS
    padded = torch.cat([unsigned, unsigned.new_zeros(padding, unsigned.shape[1])])
    return _interleave(padded, inverse=False), scale.to(torch.bfloat16).contiguous()


def unpack_int_a8(packed: torch.Tensor, bits: int, out_features: int) -> torch.Tensor:
    """The ``q [out_features, in]`` int8 values :func:`pack_int_a8` stored."""
    unsigned = _interleave(packed, inverse=True)[:out_features]
    if bits == 4:
        unsigned = _unpack_nibbles(unsigned)
    return (unsigned.to(torch.int16) - _OFFSETS[bits]).to(torch.int8)


def _interleave(rows: torch.Tensor, inverse: bool) -> torch.Tensor:
    """Rows ``[4 t, width]`` with each tile's 4 rows interleaved unit by unit, or back (``inverse``)."""
    tiles, width = rows.shape[0] // _TILE_ROWS, rows.shape[1]
    full = width // _UNIT_BYTES * _UNIT_BYTES
    by_tile = rows.reshape(tiles, _TILE_ROWS, width) if not inverse else rows.reshape(tiles, _TILE_ROWS * width)
    if not inverse:
        body = by_tile[:, :, :full].reshape(tiles, _TILE_ROWS, -1, _UNIT_BYTES).transpose(1, 2)
        out = torch.cat([body.reshape(tiles, -1), by_tile[:, :, full:].reshape(tiles, -1)], dim=1)
        return out.reshape(tiles * _TILE_ROWS, width).contiguous()
    body = by_tile[:, : _TILE_ROWS * full].reshape(tiles, -1, _TILE_ROWS, _UNIT_BYTES).transpose(1, 2)
    tail = by_tile[:, _TILE_ROWS * full :].reshape(tiles, _TILE_ROWS, width - full)
    return torch.cat([body.reshape(tiles, _TILE_ROWS, full), tail], dim=2).reshape(tiles * _TILE_ROWS, width)


def _pack_nibbles(unsigned: torch.Tensor) -> torch.Tensor:
    out_features, in_features = unsigned.shape
    full = in_features // _NIBBLE_BLOCK * _NIBBLE_BLOCK
    parts = [unsigned[:, :full].reshape(out_features, -1, 2, _NIBBLE_BLOCK // 2)]
    if full < in_features:  # a last 64 columns
        parts.append(unsigned[:, full:].reshape(out_features, 1, 2, (in_features - full) // 2))
    return torch.cat([(part[:, :, 0] | (part[:, :, 1] << 4)).reshape(out_features, -1) for part in parts], dim=1)


def _unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    out_features, half = packed.shape
    full = half // (_NIBBLE_BLOCK // 2) * (_NIBBLE_BLOCK // 2)
    parts = [packed[:, :full].reshape(out_features, -1, _NIBBLE_BLOCK // 2)]
    if full < half:
        parts.append(packed[:, full:].reshape(out_features, 1, half - full))
    return torch.cat([torch.stack([part & 0x0F, part >> 4], dim=2).reshape(out_features, -1) for part in parts],
                     dim=1)


def quantize_activations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q, scale)`` of each row of ``x``, float32 both: ``q`` integers in [-127, 127], ``scale [..., 1]``."""
    values = x.float()
    scale = values.abs().amax(dim=-1, keepdim=True) / ACTIVATION_LEVELS
    divisor = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(values / divisor).clamp(-ACTIVATION_LEVELS, ACTIVATION_LEVELS), scale


def int_a8_reference_linear(x: torch.Tensor, q: torch.Tensor, scale: torch.Tensor,
                            bias: torch.Tensor | None = None) -> torch.Tensor:
    """The kernel's product in PyTorch: per-row int8 activations times ``q * scale``, in float32, in ``x``'s dtype."""
    x_q, x_scale = quantize_activations(x)
    y = F.linear(x_q * x_scale, dequantize(q, scale, torch.float32), None if bias is None else bias.float())
    return y.to(x.dtype)
