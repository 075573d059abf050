"""One kernel of csrc/ run alone under QEMU: the firmware's runtime around a single C call.

A kernel is proved bit-exact before any model uses it: ``kernel_firmware`` writes a
``model.c`` whose ``rlx_model`` is one call on static input / output buffers and ``const``
operands (flash), builds it with the target's toolchain (same flags, same cache) and returns a
``Firmware`` whose ``run_calls`` feeds many inputs in one emulator launch, exactly as a
compiled model is run.
"""

from __future__ import annotations

from typing import Any

from rlx_core.ir.graph import ArenaPlan
from rlx_core.targets.cortex_m.emitter import CTYPE, FirmwareSource, IoSpec, _c_array


def window(n: int, h: int, w: int, c: int, kernel: tuple[int, int], stride: tuple[int, int],
           pad: tuple[int, int]) -> tuple[str, tuple[int, int]]:
    """A ``rlx_win_t`` initializer (csrc/rlx_conv.h) and the output (OH, OW)."""
    oh = (h + 2 * pad[0] - kernel[0]) // stride[0] + 1
    ow = (w + 2 * pad[1] - kernel[1]) // stride[1] + 1
    vals = (n, h, w, c, oh, ow, *kernel, *stride, *pad)
    return "{" + ", ".join(str(v) for v in vals) + "}", (oh, ow)


def kernel_firmware(call: str, inputs: list[tuple[str, str, tuple[int, ...]]],
                    outputs: list[tuple[str, str, tuple[int, ...]]],
                    consts: dict[str, Any], board: str | None = None, dsp: bool = True) -> Any:
    """A Firmware running ``call`` (C statements over the named buffers and constants)."""
    import numpy as np

    from rlx_core.ir import dtypes as dt
    from rlx_core.targets.cortex_m.boards import board as get_board
    from rlx_core.targets.cortex_m.runtime import Firmware
    from rlx_core.targets.cortex_m.toolchain import build_elf

    def spec(i: int, v: tuple[str, str, tuple[int, ...]]) -> IoSpec:
        return IoSpec(v[0], v[1], tuple(v[2]), i)

    ins = [spec(i, v) for i, v in enumerate(inputs)]
    outs = [spec(i, v) for i, v in enumerate(outputs)]
    bufs = [f"static {CTYPE[s.dtype]} {s.value}[{max(1, int(np.prod(s.shape)))}] "
            "__attribute__((aligned(8)));" for s in ins + outs]
    decls = []
    for name, arr in consts.items():
        arr = np.asarray(arr)
        decls.append(_c_array(name, CTYPE[dt.get(arr.dtype.name).name], arr))
    model_c = "\n".join([
        '#include "model.h"', '#include "rlx_nn.h"', *bufs, *decls,
        f"uint8_t *const rlx_in_ptr[{len(ins)}] = {{{', '.join(f'(uint8_t *){s.value}' for s in ins)}}};",
        f"const uint32_t rlx_in_size[{len(ins)}] = {{{', '.join(str(s.nbytes) for s in ins)}}};",
        f"uint8_t *const rlx_out_ptr[{len(outs)}] = {{{', '.join(f'(uint8_t *){s.value}' for s in outs)}}};",
        f"const uint32_t rlx_out_size[{len(outs)}] = {{{', '.join(str(s.nbytes) for s in outs)}}};",
        "void rlx_model(void) {", f"    {call}", "}", ""])
    model_h = "\n".join([
        "#ifndef RLX_MODEL_H", "#define RLX_MODEL_H", "#include <stdint.h>",
        f"#define RLX_N_IN {len(ins)}", f"#define RLX_N_OUT {len(outs)}",
        f"extern uint8_t *const rlx_in_ptr[{len(ins)}];",
        f"extern const uint32_t rlx_in_size[{len(ins)}];",
        f"extern uint8_t *const rlx_out_ptr[{len(outs)}];",
        f"extern const uint32_t rlx_out_size[{len(outs)}];",
        "void rlx_model(void);", "#endif", ""])
    b = get_board(board)
    src = FirmwareSource(model_c, model_h, ins, outs, ArenaPlan((), 0, 0), 0, 0)
    return Firmware(src, build_elf(model_c, model_h, b, dsp=dsp), b, {})
