"""Helper functions the expressions call, written once and spelled by the dialect.

erf (Abramowitz-Stegun 7.1.26, |err| < 1.5e-7), log and tanh accurate where drivers are not,
C fmod, and pow with numpy's rules (negative bases, integer exponents by squaring).
"""

from __future__ import annotations

from collections.abc import Callable

from rlx_core.targets.gpu_common.dialect import Dialect


def _erf(d: Dialect) -> list[str]:
    L = d.float_lit
    return [
        d.function("rlx_erf", [("x", "f32")], "f32"),
        f"  if (({d.bitcast('u32', 'x')} & 0x7fffffffu) > 0x7f800000u) {{ return x; }}",
        f"  {d.let('a', 'f32', f'{d.fabs}(x)')}",
        # near 0 the Taylor series: A-S 7.1.26's error is absolute (1.5e-7), which is all of
        # erf(1e-9); the series' next term at 0.25 is 2e-10 relative
        f"  if (a < {L(0.25)}) {{",
        f"    {d.let('z', 'f32', 'x * x')}",
        f"    return x * ({L(1.1283791671)} + z * ({L(-0.3761263890)} + z * ({L(0.1128379167)}"
        f" + z * ({L(-0.0268661706)} + z * {L(0.0052239776)}))));",
        "  }",
        f"  {d.let('t', 'f32', f'{L(1.0)} / ({L(1.0)} + {L(0.3275911)} * a)')}",
        "  " + d.let("p", "f32", f"t * ({L(0.254829592)} + t * ({L(-0.284496736)} + t * ("
                                f"{L(1.421413741)} + t * ({L(-1.453152027)} + t * "
                                f"{L(1.061405429)}))))"),
        f"  {d.let('r', 'f32', f'{L(1.0)} - p * exp(-a * a)')}",
        f"  return {d.select('r', '-r', f'x < {L(0.0)}')};",
        "}"]


def _log(d: Dialect) -> list[str]:
    # log by reduction to [sqrt(1/2), sqrt(2)) and the atanh series: Vulkan lets log() be off
    # by 2^-21 absolute near 1, so log(1 + y) for small y (softplus, mish) lost 3 digits
    L, u, f = d.float_lit, d.bitcast("u32", "x"), d.bitcast
    return [
        d.function("rlx_log", [("x", "f32")], "f32"),
        f"  {d.let('u', 'u32', u)}",
        "  if ((u & 0x7fffffffu) > 0x7f800000u || u > 0x80000000u) {",
        f"    return {d.nonfinite_lit(0x7FC00000)};", "  }",
        f"  if ((u & 0x7fffffffu) == 0u) {{ return {d.nonfinite_lit(0xFF800000)}; }}",
        "  if (u == 0x7f800000u) { return x; }",
        f"  {d.var('m', 'f32', 'x')}", f"  {d.var('e', 'f32', L(0.0))}",
        f"  if (u < 0x00800000u) {{ m = x * {L(8388608.0)}; e = {L(-23.0)}; }}",
        f"  {d.let('b', 'u32', f('u32', 'm'))}",
        f"  e = e + {d.conv('f32', d.conv('i32', '(b >> 23u) & 0xffu') + ' - 127')};",
        f"  m = {f('f32', '(b & 0x007fffffu) | 0x3f800000u')};",
        f"  if (m > {L(1.41421356)}) {{ m = m * {L(0.5)}; e = e + {L(1.0)}; }}",
        f"  {d.let('g', 'f32', f'(m - {L(1.0)}) / (m + {L(1.0)})')}",
        f"  {d.let('g2', 'f32', 'g * g')}",
        "  " + d.let("s", "f32", f"g2 * ({L(0.6666666667)} + g2 * ({L(0.4)} + g2 * ("
                                f"{L(0.2857142857)} + g2 * ({L(0.2222222222)} + g2 * "
                                f"{L(0.1818181818)}))))"),
        f"  return e * {L(0.693147180559945)} + ({L(2.0)} * g + g * s);",
        "}"]


def _tanh(d: Dialect) -> list[str]:
    # the series near 0, where lavapipe's tanh (a quotient of exponentials) cancels
    # (tanh(4.5e-5) was 0.2% off, which broke mish at x = -10); NaN stays NaN
    L = d.float_lit
    return [
        d.function("rlx_tanh", [("x", "f32")], "f32"),
        f"  if (({d.bitcast('u32', 'x')} & 0x7fffffffu) > 0x7f800000u) {{ return x; }}",
        f"  {d.let('a', 'f32', f'{d.fabs}(x)')}",
        f"  if (a < {L(0.125)}) {{",
        f"    {d.let('z', 'f32', 'x * x')}",
        f"    return x + x * z * ({L(-0.3333333333)} + z * ({L(0.1333333333)} + z * ("
        f"{L(-0.0539682540)} + z * {L(0.0218694885)})));",
        "  }",
        f"  {d.let('e', 'f32', f'exp({L(2.0)} * min(a, {L(15.0)}))')}",
        f"  {d.let('r', 'f32', f'(e - {L(1.0)}) / (e + {L(1.0)})')}",
        f"  return {d.select('r', '-r', f'x < {L(0.0)}')};",
        "}"]


def _fmod(d: Dialect) -> list[str]:
    # C fmod, exact: NaN for an infinite or NaN dividend, a NaN or zero divisor; a for
    # b = +-inf; else subtract the largest y * 2^k <= r until r < y (each step exact by
    # Sterbenz's lemma, at most one per binade); a - b * trunc(a / b) lost everything once
    # a / b overflowed or passed 2^24
    u, L = d.bitcast, d.float_lit
    # y * 2^k with r's binade: y's mantissa under r's exponent field (y normal; ldexp would
    # do, but glslang's HLSL front end emits an ldexp spirv-val rejects)
    step = d.var("t", "f32", u("f32", f"(ub & 0x007fffffu) | ({u('u32', 'r')} & 0x7f800000u)"))
    sign_a = u("u32", "a")
    return [
        d.function("rlx_fmod", [("a", "f32"), ("b", "f32")], "f32"),
        f"  {d.let('ua', 'u32', u('u32', 'a') + ' & 0x7fffffffu')}",
        f"  {d.let('ub', 'u32', u('u32', 'b') + ' & 0x7fffffffu')}",
        "  if (ua >= 0x7f800000u || ub > 0x7f800000u || ub == 0u) {",
        f"    return {d.nonfinite_lit(0x7FC00000)};", "  }",
        "  if (ub == 0x7f800000u || ua < ub) { return a; }",
        # a subnormal divisor has no exponent field to move: integers instead. b = ub * 2^-149
        # and a = ma * 2^k * 2^-149, so the remainder is ((ma mod ub) * 2^k) mod ub units of
        # 2^-149, doubled k times in u32 (ub < 2^23): exactly the bits of a subnormal result.
        # (a - b * trunc(a / b) gave -inf once a / b overflowed: a bf16 fuzz finding on vulkan)
        "  if (ub < 0x00800000u) {",
        f"    {d.let('ea', 'u32', 'ua >> 23u')}",
        f"    {d.var('x', 'u32', d.select('(ua & 0x007fffffu) | 0x00800000u', 'ua', 'ea == 0u'))}",
        f"    {d.var('k', 'u32', d.select('ea - 1u', '0u', 'ea == 0u'))}",
        "    x = x % ub;",
        "    while (k > 0u) { x = (x << 1u) % ub; k = k - 1u; }",
        f"    return {u('f32', f'x | ({sign_a} & 0x80000000u)')};",
        "  }",
        f"  {d.let('y', 'f32', u('f32', 'ub'))}",
        f"  {d.var('r', 'f32', u('f32', 'ua'))}",
        f"  {d.var('n', 'u32', '0u')}",
        "  while (r >= y && n < 300u) {",
        f"    {step}",
        f"    if (t > r) {{ t = t * {L(0.5)}; }}",
        "    r = r - t; n = n + 1u;",
        "  }",
        f"  return {d.select('r', '-r', f'a < {L(0.0)}')};",
        "}"]


def _powf(d: Dialect) -> list[str]:
    # C99 pow (what numpy computes) on the bits: drivers' pow is exp2(b * log2(a)), which gets
    # 0^-2, 1^inf, NaN^0, the signs of negative bases and subnormal bases wrong
    L, u = d.float_lit, d.bitcast
    inf, nan = d.nonfinite_lit(0x7F800000), d.nonfinite_lit(0x7FC00000)
    return [
        d.function("rlx_powf", [("a", "f32"), ("b", "f32")], "f32"),
        f"  {d.let('ua', 'u32', u('u32', 'a') + ' & 0x7fffffffu')}",
        f"  {d.let('ub', 'u32', u('u32', 'b') + ' & 0x7fffffffu')}",
        f"  if (ub == 0u || {u('u32', 'a')} == 0x3f800000u) {{ return {L(1.0)}; }}",
        f"  if (ua > 0x7f800000u || ub > 0x7f800000u) {{ return {nan}; }}",
        "  " + d.let("neg", "bool", f"({u('u32', 'a')} >> 31u) == 1u"),
        f"  {d.let('binf', 'bool', 'ub == 0x7f800000u')}",
        f"  {d.let('h', 'f32', f'b * {L(0.5)}')}",
        f"  {d.let('odd', 'bool', '!binf && floor(b) == b && floor(h) != h')}",
        # a finite negative base to a non-integer power (-0 and -inf have C99 answers)
        f"  if (neg && ua != 0u && ua < 0x7f800000u && floor(b) != b) {{ return {nan}; }}",
        f"  {d.let('x', 'f32', u('f32', 'ua'))}",
        f"  {d.var('m', 'f32', L(0.0))}",
        "  if (binf) {",
        f"    if (ua == 0x3f800000u) {{ m = {L(1.0)}; }}",
        f"    else if ((x < {L(1.0)}) == (b < {L(0.0)})) {{ m = {inf}; }}",
        "  } else if (ua == 0u) {",
        f"    if (b < {L(0.0)}) {{ m = {inf}; }}",
        "  } else if (ua == 0x7f800000u) {",
        f"    if (b > {L(0.0)}) {{ m = {inf}; }}",
        "  } else if (ua < 0x00800000u) {",
        # a subnormal base: Mesa's pow/log2 read its exponent field as -127 whatever its
        # mantissa (pow(-1.4e-45, -1) gave -2^127, not -inf); its value is ua * 2^-149, and ua
        # converts to f32 exactly, so no subnormal reaches the driver
        f"    m = exp2(b * (log2({d.conv('f32', 'ua')}) - {L(149.0)}));",
        "  } else {",
        "    m = pow(x, b);",
        "  }",
        f"  return {d.select('m', '-m', 'neg && odd')};",
        "}"]


def _powi(d: Dialect) -> list[str]:
    mul = d.int_binary
    # a negative exponent: 1 for a = 1, +-1 for a = -1, else 0 (the reference's integer pow)
    neg = d.select(d.select("0", d.select("1", "-1", "(b & 1) == 1"), "a == -1"), "1", "a == 1")
    return [
        d.function("rlx_powi", [("a", "i32"), ("b", "i32")], "i32"),
        f"  if (b < 0) {{ return {neg}; }}",
        f"  {d.var('r', 'i32', '1')} {d.var('x', 'i32', 'a')} {d.var('e', 'i32', 'b')}",
        "  while (e != 0) {",
        f"    if ((e & 1) == 1) {{ r = {mul('*', 'r', 'x', 'i32')}; }}",
        f"    x = {mul('*', 'x', 'x', 'i32')}; e = e >> 1u;",
        "  }",
        "  return r;",
        "}"]


def _powu(d: Dialect) -> list[str]:
    return [
        d.function("rlx_powu", [("a", "u32"), ("b", "u32")], "u32"),
        f"  {d.var('r', 'u32', '1u')} {d.var('x', 'u32', 'a')} {d.var('e', 'u32', 'b')}",
        "  while (e != 0u) {",
        "    if ((e & 1u) == 1u) { r = r * x; }",
        "    x = x * x; e = e >> 1u;",
        "  }",
        "  return r;",
        "}"]


def _bf16(d: Dialect) -> list[str]:
    # bf16 is the top half of an f32: round to nearest even by adding 0x7fff plus the lowest
    # kept bit (the reference's round_bf16); NaN becomes the canonical quiet NaN, as there
    return [
        d.function("rlx_bf16_bits", [("x", "f32")], "u32"),
        f"  {d.let('u', 'u32', d.bitcast('u32', 'x'))}",
        "  if ((u & 0x7fffffffu) > 0x7f800000u) { return 0x7fc0u; }",
        "  return (u + 0x7fffu + ((u >> 16u) & 1u)) >> 16u;",
        "}",
        d.function("rlx_bf16", [("x", "f32")], "f32"),
        f"  return {d.bitcast('f32', '(rlx_bf16_bits(x) << 16u)')};",
        "}"]


HELPERS: dict[str, Callable[[Dialect], list[str]]] = {
    "rlx_bf16": _bf16,
    "rlx_erf": _erf, "rlx_log": _log, "rlx_tanh": _tanh, "rlx_fmod": _fmod,
    "rlx_powf": _powf, "rlx_powi": _powi, "rlx_powu": _powu}


def helpers(d: Dialect, used: set[str]) -> list[str]:
    """Source of the helpers named in ``used``, each followed by a blank line."""
    out: list[str] = []
    for name in sorted(used):
        out += [*d.guard(name, HELPERS[name](d)), ""]
    return out
