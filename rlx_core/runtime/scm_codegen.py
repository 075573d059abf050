"""C source of a specialization cache module (Trident's SCM) for the CPU target.

One CPython extension module per jitted function is linked from three kinds of translation
unit, all compiled by the CPU toolchain into one shared object:

* ``RUNTIME_SOURCE`` (fixed text, the same for every module): the Python-facing glue. Its
  ``create`` returns a METH_FASTCALL function bound to a state object; a call reads each argument
  (numpy array via the numpy C API, anything else via ``PyObject_GetBuffer``), asks the table's
  generated ``select`` for the first specialization whose guards pass, prepares arguments
  (copies non-contiguous ones for specializations that accept any layout), allocates the numpy
  outputs, reuses one 64-byte aligned arena per specialization and calls the kernel entry. A hit
  never returns to the interpreter; a miss calls the ``on_miss`` callback it was created with
  (the only way back into Python) and returns what it returns.
* the **table** (``render_table``, generated, plain C without Python.h so it compiles in
  milliseconds): the straight-line guard checks of every specialization in order, and per
  specialization its entry point, output types and arena size.
* one **kernel** unit per distinct specialization program (the CPU renderer's ``CProgram``
  source, entry ``<prefix>_run``); each is its own unit so that ``static`` helpers of different
  programs never collide, and so that an unchanged kernel's object file is reused from the disk
  cache when the module is rebuilt after a miss.

The runtime and the table agree on the ABI in ``ABI_HEADER``, prepended to both.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlx_core.errors import RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType

# Bump when ABI_HEADER or the runtime's expectations of the table change: the runtime refuses a
# table with another number (a stale object file in the disk cache must not be linked against).
SCM_ABI = 2

# rlx dtype -> the code the C side uses. Only dtypes whose host array layout is the dtype itself
# can cross the module boundary; bf16 and packed i4 have no numpy dtype (see dtypes.to_numpy_name).
DTYPE_CODES: dict[str, int] = {
    "bool": 1, "i8": 2, "i16": 3, "i32": 4, "i64": 5, "u8": 6, "u32": 7,
    "f16": 8, "f32": 9, "f64": 10, "c64": 11,
}

# Most arguments a call may pass; the runtime keeps per-argument state in fixed stack arrays.
MAX_ARGS = 64


class ScmCodegenError(RlxError):
    """A specialization cannot be expressed in the SCM's C ABI (e.g. a bf16 function argument)."""

    code = "RLX-R010"


ABI_HEADER = """\
/* rlx specialization cache module ABI (shared by the runtime glue and the generated table). */
#include <stdint.h>
#define RLX_SCM_ABI @ABI@
#define RLX_SCM_MAX_ARGS @MAX_ARGS@
enum {
    RLX_BOOL = 1, RLX_I8 = 2, RLX_I16 = 3, RLX_I32 = 4, RLX_I64 = 5, RLX_U8 = 6, RLX_U32 = 7,
    RLX_F16 = 8, RLX_F32 = 9, RLX_F64 = 10, RLX_C64 = 11
};
/* What the guards see of one argument: dtype code (-1: none of ours), rank, dims, and whether
   its bytes can be read in place (C-contiguous, aligned, native byte order). */
typedef struct { int32_t dtype; int32_t ndim; int32_t dense; const intptr_t* dims; } rlx_scm_arg;
typedef struct { int32_t dtype; int32_t ndim; const intptr_t* dims; } rlx_scm_tensor;
typedef void (*rlx_scm_run_fn)(const void* const* inputs, const void* const* params,
                               void* const* outputs, unsigned char* arena);
typedef int (*rlx_scm_error_fn)(int64_t* info);
typedef struct {
    rlx_scm_run_fn run;
    rlx_scm_error_fn error;  /* 0, or 1 + kernel index of a runtime error (reading clears it) */
    int32_t n_inputs, n_params, n_outputs;
    int32_t any_layout;      /* 1: copies non-dense inputs to contiguous before the call */
    int64_t arena_bytes;
    const rlx_scm_tensor* outputs;
    const int32_t* alias_of; /* 0, or per output: the donated argument it may be written into
                                (-1: none; runtime/donation.py) */
} rlx_scm_spec;
typedef struct {
    int32_t abi;
    int32_t n_specs;
    int32_t arity;           /* argument count every specialization takes; -1 when they differ */
    const rlx_scm_spec* specs;
    int32_t (*select)(int32_t nargs, const rlx_scm_arg* args);
} rlx_scm_table_t;
extern const rlx_scm_table_t rlx_scm_module_table;
""".replace("@ABI@", str(SCM_ABI)).replace("@MAX_ARGS@", str(MAX_ARGS))


@dataclass(frozen=True)
class SpecEntry:
    """What the table needs to know about one specialization (in cache order)."""

    prefix: str  # the kernel program's entry is ``<prefix>_run``
    error_fn: str  # ``int <error_fn>(int64_t* info)``: its runtime error check
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]
    n_params: int
    arena_bytes: int
    any_layout: bool  # False: guards require dense inputs; True: non-dense inputs are copied
    aliases: tuple[int, ...] = ()  # per output: a donated argument to write it into, or -1


def dtype_code(dtype: dt.DType, what: str) -> str:
    """The C name of ``dtype``'s code (``RLX_F32``); raises ScmCodegenError for dtypes with no
    host layout."""
    if dtype.name not in DTYPE_CODES:
        raise ScmCodegenError(
            f"{what} has dtype {dtype.name}, which has no host array layout the CPU "
            f"specialization cache can pass in place",
            hint="cast it at the function boundary (e.g. take f32 and call rlx.astype inside), "
                 "or use rlx.compile(..., target='cpu') which converts arguments in Python")
    return "RLX_" + dtype.name.upper()


def _c_ident_ok(prefix: str) -> bool:
    # the prefix lands in generated C: only identifiers we made ourselves are allowed
    return prefix.isidentifier() and prefix.isascii()


def _guard_terms(i: int, ty: TensorType, dense: bool) -> list[str]:
    # same order as Guard.first_failure in specialization_cache: shape, dtype, layout
    terms = [f"a[{i}].ndim == {ty.rank}"]
    terms += [f"a[{i}].dims[{d}] == {size}" for d, size in enumerate(ty.shape)]
    terms.append(f"a[{i}].dtype == {dtype_code(ty.dtype, f'argument {i}')}")
    if dense:
        terms.append(f"a[{i}].dense")
    return terms


def _dims_literal(shape: tuple[int, ...]) -> str:
    # C has no empty initialiser lists; rank-0 tensors get a dummy element no one reads
    return "{" + ", ".join(str(d) for d in shape or (0,)) + "}"


def render_table(entries: tuple[SpecEntry, ...], arity: int = -1) -> str:
    """The generated translation unit: guards of every specialization, in order, and the table.

    ``arity`` is the fixed argument count of the function, or -1 when it has none.

    The guard of specialization k is one conjunction, so the first failing term stops it::

        if (n == 1 && a[0].ndim == 1 && a[0].dims[0] == 8 && a[0].dtype == RLX_F32 && a[0].dense)
            return 0;
    """
    if not entries:
        raise ScmCodegenError("a specialization cache module needs at least one specialization")
    # ``arity`` >= 0: the function always takes exactly that many arguments, so the runtime
    # rejects any other count as an error; -1 (defaults, *args): another count is just a miss
    if arity >= 0 and any(len(e.inputs) != arity for e in entries):
        raise ScmCodegenError(f"a specialization's argument count differs from the arity {arity}")
    lines = [ABI_HEADER, "/* generated by rlx_core.runtime.scm_codegen: do not edit */", ""]
    for prefix, error_fn in dict.fromkeys((e.prefix, e.error_fn) for e in entries):
        if not (_c_ident_ok(prefix) and _c_ident_ok(error_fn)):
            raise ScmCodegenError(f"kernel prefix {prefix!r} / {error_fn!r} is not a C identifier")
        lines.append(f"void {prefix}_run(const void* const* inputs, const void* const* params, "
                     f"void* const* outputs, unsigned char* arena);")
        lines.append(f"int {error_fn}(int64_t* info);")
    lines.append("")
    lines.append("static int32_t rlx_scm_select(int32_t n, const rlx_scm_arg* a) {")
    for k, e in enumerate(entries):
        if len(e.inputs) > MAX_ARGS:
            raise ScmCodegenError(f"specialization {k} takes {len(e.inputs)} arguments; the "
                                  f"CPU specialization cache supports at most {MAX_ARGS}")
        sig = " ".join(str(t) for t in e.inputs) or "(no arguments)"
        layout = "any layout (copies)" if e.any_layout else "contiguous"
        lines.append(f"    /* {k}: {sig}, {layout} */")
        terms = [f"n == {len(e.inputs)}"]
        for i, ty in enumerate(e.inputs):
            terms += _guard_terms(i, ty, dense=not e.any_layout)
        lines.append("    if (" + "\n        && ".join(terms) + ")")
        lines.append(f"        return {k};")
    lines.append("    return -1;")
    lines.append("}")
    lines.append("")
    for k, e in enumerate(entries):
        for j, ty in enumerate(e.outputs):
            lines.append(f"static const intptr_t s{k}_out{j}_dims[] = {_dims_literal(ty.shape)};")
        outs = ", ".join(
            f"{{{dtype_code(ty.dtype, f'output {j}')}, {ty.rank}, s{k}_out{j}_dims}}"
            for j, ty in enumerate(e.outputs))
        lines.append(f"static const rlx_scm_tensor s{k}_outs[] = {{{outs}}};")
        if max(e.aliases, default=-1) >= 0:
            lines.append(f"static const int32_t s{k}_alias[] = "
                         f"{{{', '.join(str(i) for i in e.aliases)}}};")
    lines.append("")
    lines.append("static const rlx_scm_spec rlx_scm_specs[] = {")
    for k, e in enumerate(entries):
        lines.append(f"    {{{e.prefix}_run, {e.error_fn}, {len(e.inputs)}, {e.n_params}, "
                     f"{len(e.outputs)}, "
                     f"{int(e.any_layout)}, {int(e.arena_bytes)}, s{k}_outs, "
                     f"{f's{k}_alias' if max(e.aliases, default=-1) >= 0 else '0'}}},")
    lines.append("};")
    lines.append("")
    lines.append(f"const rlx_scm_table_t rlx_scm_module_table = {{RLX_SCM_ABI, {len(entries)}, "
                 f"{arity}, rlx_scm_specs, rlx_scm_select}};")
    return "\n".join(lines) + "\n"


def runtime_source(module_name: str) -> str:
    """The fixed runtime glue, exporting ``PyInit_<module_name>``."""
    if not _c_ident_ok(module_name):
        raise ScmCodegenError(f"module name {module_name!r} is not a C identifier")
    return ABI_HEADER + RUNTIME_SOURCE.replace("@MODULE@", module_name)


# The module name every SCM shared object is loaded under (each from its own file path).
MODULE_NAME = "_rlx_scm"

RUNTIME_SOURCE = r"""
/* rlx SCM runtime glue: the hit path of every jitted function on the CPU target. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(npy_intp) == sizeof(intptr_t), "npy_intp must be pointer sized");
_Static_assert(sizeof(Py_ssize_t) == sizeof(intptr_t), "Py_ssize_t must be pointer sized");

static int npy_of(int32_t code) {
    switch (code) {
    case RLX_BOOL: return NPY_BOOL;
    case RLX_I8: return NPY_INT8;
    case RLX_I16: return NPY_INT16;
    case RLX_I32: return NPY_INT32;
    case RLX_I64: return NPY_INT64;
    case RLX_U8: return NPY_UINT8;
    case RLX_U32: return NPY_UINT32;
    case RLX_F16: return NPY_FLOAT16;
    case RLX_F32: return NPY_FLOAT32;
    case RLX_F64: return NPY_FLOAT64;
    case RLX_C64: return NPY_COMPLEX64;
    default: return -1;
    }
}

static int32_t code_of_npy(int t) {
    switch (t) {
    case NPY_BOOL: return RLX_BOOL;
    case NPY_BYTE: return RLX_I8;
    case NPY_UBYTE: return RLX_U8;
    case NPY_SHORT: return RLX_I16;
    case NPY_INT: return sizeof(int) == 4 ? RLX_I32 : -1;
    case NPY_UINT: return sizeof(unsigned int) == 4 ? RLX_U32 : -1;
    case NPY_LONG: return sizeof(long) == 8 ? RLX_I64 : (sizeof(long) == 4 ? RLX_I32 : -1);
    case NPY_ULONG: return sizeof(unsigned long) == 4 ? RLX_U32 : -1;
    case NPY_LONGLONG: return sizeof(long long) == 8 ? RLX_I64 : -1;
    case NPY_HALF: return RLX_F16;
    case NPY_FLOAT: return RLX_F32;
    case NPY_DOUBLE: return RLX_F64;
    case NPY_CFLOAT: return RLX_C64;
    default: return -1;
    }
}

/* struct-module format of a buffer -> dtype code (-1: none of ours); *native is cleared for a
   non-native byte order, which makes the argument non-dense (copied by an any-layout spec) */
static int32_t code_of_format(const char* fmt, Py_ssize_t itemsize, int* native) {
    *native = 1;
    if (fmt == NULL) return itemsize == 1 ? RLX_U8 : -1;  /* NULL format means unsigned bytes */
    if (*fmt == '@' || *fmt == '=') {
        fmt++;
    } else if (*fmt == '<' || *fmt == '>' || *fmt == '!') {
#if PY_LITTLE_ENDIAN
        *native = *fmt == '<';
#else
        *native = *fmt != '<';
#endif
        fmt++;
    }
    if (fmt[0] == 'Z' && fmt[1] == 'f' && fmt[2] == 0) return itemsize == 8 ? RLX_C64 : -1;
    if (fmt[0] == 0 || fmt[1] != 0) return -1;
    switch (fmt[0]) {
    case '?': return RLX_BOOL;
    case 'b': return RLX_I8;
    case 'B': return RLX_U8;
    case 'h': return RLX_I16;
    case 'i': case 'l': case 'q': return itemsize == 8 ? RLX_I64 : (itemsize == 4 ? RLX_I32 : -1);
    case 'I': case 'L': case 'Q': return itemsize == 4 ? RLX_U32 : -1;
    case 'e': return RLX_F16;
    case 'f': return RLX_F32;
    case 'd': return RLX_F64;
    default: return -1;
    }
}

typedef struct {
    PyObject_HEAD
    const rlx_scm_table_t* table;
    PyObject* on_miss;    /* called with the arguments when no guard passes */
    PyObject* arg_error;  /* rlx_core.errors.ArgumentError */
    PyObject* on_error;   /* on_error(spec, kernel, info0, info1) raises a kernel's runtime error */
    PyObject* params;     /* tuple (per specialization) of tuples of arrays: keeps them alive */
    const void** param_ptrs;  /* flat: specialization k starts at param_base[k] */
    Py_ssize_t* param_base;
    unsigned char** arenas;   /* per specialization, allocated on its first call, then reused */
    unsigned long long* hits; /* per specialization */
    int32_t* log;             /* specialization index of each counted hit, in call order */
    Py_ssize_t log_len, log_cap;
} ScmState;

static int state_traverse(ScmState* st, visitproc visit, void* arg) {
    Py_VISIT(st->on_miss);
    Py_VISIT(st->arg_error);
    Py_VISIT(st->on_error);
    Py_VISIT(st->params);
    return 0;
}

static int state_clear(ScmState* st) {
    Py_CLEAR(st->on_miss);
    Py_CLEAR(st->arg_error);
    Py_CLEAR(st->on_error);
    Py_CLEAR(st->params);
    return 0;
}

static void state_dealloc(ScmState* st) {
    PyObject_GC_UnTrack(st);
    state_clear(st);
    if (st->arenas) {
        for (int32_t k = 0; k < st->table->n_specs; k++) free(st->arenas[k]);
    }
    free(st->arenas);
    free(st->param_ptrs);
    free(st->param_base);
    free(st->hits);
    free(st->log);
    Py_TYPE(st)->tp_free((PyObject*)st);
}

static PyObject* state_hits(ScmState* st, PyObject* unused) {
    PyObject* out = PyTuple_New(st->table->n_specs);
    if (!out) return NULL;
    for (int32_t k = 0; k < st->table->n_specs; k++) {
        PyObject* v = PyLong_FromUnsignedLongLong(st->hits[k]);
        if (!v) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, k, v);
    }
    return out;
}

static PyObject* state_take_log(ScmState* st, PyObject* unused) {
    PyObject* out = PyList_New(st->log_len);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < st->log_len; i++) {
        PyObject* v = PyLong_FromLong(st->log[i]);
        if (!v) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, i, v);
    }
    st->log_len = 0;
    return out;
}

static PyObject* state_set_log_capacity(ScmState* st, PyObject* arg) {
    Py_ssize_t cap = PyLong_AsSsize_t(arg);
    if (cap == -1 && PyErr_Occurred()) return NULL;
    if (cap < 0) cap = 0;
    int32_t* log = (int32_t*)realloc(st->log, (size_t)(cap ? cap : 1) * sizeof(int32_t));
    if (!log) return PyErr_NoMemory();
    st->log = log;
    st->log_cap = cap;
    if (st->log_len > cap) st->log_len = cap;
    Py_RETURN_NONE;
}

static PyObject* state_arena_bytes(ScmState* st, PyObject* unused) {
    PyObject* out = PyTuple_New(st->table->n_specs);
    if (!out) return NULL;
    for (int32_t k = 0; k < st->table->n_specs; k++) {
        long long n = st->arenas[k] ? (long long)st->table->specs[k].arena_bytes : 0;
        PyObject* v = PyLong_FromLongLong(n);
        if (!v) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, k, v);
    }
    return out;
}

static PyMethodDef state_methods[] = {
    {"hits", (PyCFunction)state_hits, METH_NOARGS, "hit count per specialization"},
    {"take_log", (PyCFunction)state_take_log, METH_NOARGS,
     "specialization index of each logged hit since the last take_log, in call order"},
    {"set_log_capacity", (PyCFunction)state_set_log_capacity, METH_O,
     "how many further hits to log (counting never stops)"},
    {"arena_bytes", (PyCFunction)state_arena_bytes, METH_NOARGS,
     "bytes of arena currently held per specialization (0 until its first call)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ScmStateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "@MODULE@.State",
    .tp_basicsize = sizeof(ScmState),
    .tp_dealloc = (destructor)state_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)state_traverse,
    .tp_clear = (inquiry)state_clear,
    .tp_doc = "per-function state of a specialization cache module: arenas, params, counters",
    .tp_methods = state_methods,
};

/* Raise arg_error(message, hint=hint). */
static void raise_argument_error(ScmState* st, const char* hint, const char* fmt, ...) {
    va_list va;
    va_start(va, fmt);
    PyObject* msg = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (!msg) return;
    PyObject* args = PyTuple_Pack(1, msg);
    Py_DECREF(msg);
    PyObject* kw = Py_BuildValue("{s:s}", "hint", hint);
    if (args && kw) {
        PyObject* err = PyObject_Call(st->arg_error, args, kw);
        if (err) {
            PyErr_SetObject((PyObject*)Py_TYPE(err), err);
            Py_DECREF(err);
        }
    }
    Py_XDECREF(args);
    Py_XDECREF(kw);
}

static const char* BUFFER_HINT =
    "pass numpy arrays (or objects with the buffer protocol), e.g. np.asarray(x, np.float32)";

/* [lo, hi): the bytes an array or buffer argument spans (strides may be negative); lo == hi
   when it holds no element */
static void span_of(int ndim, const Py_ssize_t* dims, const Py_ssize_t* strides,
                    Py_ssize_t itemsize, char* base, char** lo, char** hi) {
    char *l = base, *h = base + itemsize;
    for (int d = 0; d < ndim; d++) {
        if (dims[d] == 0) { *lo = *hi = base; return; }
        Py_ssize_t reach = strides[d] * (dims[d] - 1);
        if (reach < 0) l += reach; else h += reach;
    }
    *lo = l; *hi = h;
}

static void arg_span(PyObject* o, Py_buffer* view, int held, char** lo, char** hi) {
    if (held) {
        if (!view->strides) { *lo = (char*)view->buf; *hi = (char*)view->buf + view->len; return; }
        span_of(view->ndim, view->shape, view->strides, view->itemsize, (char*)view->buf, lo, hi);
        return;
    }
    PyArrayObject* a = (PyArrayObject*)o;
    span_of(PyArray_NDIM(a), PyArray_DIMS(a), PyArray_STRIDES(a), PyArray_ITEMSIZE(a),
            PyArray_BYTES(a), lo, hi);
}

/* May an output be written into donated argument i (runtime/donation.py)? Only a writeable,
   dense numpy array sharing no byte with another argument or a weight of specialization k;
   anything else gets a fresh output, which the kernel fills the same way. */
static int donatable(ScmState* st, int32_t k, PyObject* const* args, Py_buffer* views,
                     unsigned long long held, Py_ssize_t nargs, Py_ssize_t i) {
    if (!PyArray_Check(args[i]) || (held & (1ULL << i))) return 0;
    PyArrayObject* arr = (PyArrayObject*)args[i];
    if (!(PyArray_IS_C_CONTIGUOUS(arr) && PyArray_ISALIGNED(arr) && PyArray_ISNOTSWAPPED(arr)
          && PyArray_ISWRITEABLE(arr)))
        return 0;
    char *lo, *hi, *l2, *h2;
    arg_span(args[i], NULL, 0, &lo, &hi);
    if (lo == hi) return 0;
    for (Py_ssize_t j = 0; j < nargs; j++) {
        if (j == i) continue;
        arg_span(args[j], &views[j], (int)((held >> j) & 1ULL), &l2, &h2);
        if (l2 < hi && lo < h2) return 0;
    }
    PyObject* ps = PyTuple_GET_ITEM(st->params, k);
    for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(ps); p++) {
        arg_span(PyTuple_GET_ITEM(ps, p), NULL, 0, &l2, &h2);
        if (l2 < hi && lo < h2) return 0;
    }
    return 1;
}

static PyObject* dispatch(ScmState* st, PyObject* const* args, Py_ssize_t nargs, int count) {
    const rlx_scm_table_t* t = st->table;
    if (t->arity >= 0 && nargs != t->arity) {
        raise_argument_error(st, "call it with the arguments of the jitted function",
                             "the jitted function takes %d argument(s), got %zd",
                             (int)t->arity, nargs);
        return NULL;
    }
    if (nargs > RLX_SCM_MAX_ARGS) {
        raise_argument_error(st, "pack arguments into fewer arrays",
                             "got %zd arguments; at most %d are supported",
                             nargs, (int)RLX_SCM_MAX_ARGS);
        return NULL;
    }
    rlx_scm_arg a[RLX_SCM_MAX_ARGS];
    const void* data[RLX_SCM_MAX_ARGS];
    Py_buffer views[RLX_SCM_MAX_ARGS];
    PyObject* copies[RLX_SCM_MAX_ARGS];
    PyObject* outs[RLX_SCM_MAX_ARGS];
    void* out_ptrs[RLX_SCM_MAX_ARGS];
    unsigned long long held = 0, copied = 0;
    int32_t n_outs = 0, k = -1, miss = 0;
    const rlx_scm_spec* s = NULL;
    PyObject* result = NULL;

    for (Py_ssize_t i = 0; i < nargs; i++) {
        PyObject* o = args[i];
        if (PyArray_Check(o)) {
            PyArrayObject* arr = (PyArrayObject*)o;
            a[i].dtype = code_of_npy(PyArray_TYPE(arr));
            a[i].ndim = PyArray_NDIM(arr);
            a[i].dims = (const intptr_t*)PyArray_DIMS(arr);
            a[i].dense = PyArray_IS_C_CONTIGUOUS(arr) && PyArray_ISALIGNED(arr)
                         && PyArray_ISNOTSWAPPED(arr);
            data[i] = PyArray_DATA(arr);
        } else if (PyObject_CheckBuffer(o)) {
            if (PyObject_GetBuffer(o, &views[i], PyBUF_RECORDS_RO) < 0) {
                PyErr_Clear();
                raise_argument_error(st, BUFFER_HINT,
                                     "argument %zd (%s) does not export a readable strided buffer",
                                     i, Py_TYPE(o)->tp_name);
                goto done;
            }
            held |= 1ULL << i;
            Py_buffer* v = &views[i];
            int native = 1;
            a[i].dtype = code_of_format(v->format, v->itemsize, &native);
            a[i].ndim = v->ndim;
            a[i].dims = (const intptr_t*)v->shape;
            a[i].dense = native && PyBuffer_IsContiguous(v, 'C')
                         && (v->itemsize == 0 || ((uintptr_t)v->buf % (uintptr_t)v->itemsize) == 0);
            data[i] = v->buf;
        } else {
            raise_argument_error(st, BUFFER_HINT, "argument %zd is a %s, not an array or buffer",
                                 i, Py_TYPE(o)->tp_name);
            goto done;
        }
    }

    k = t->select((int32_t)nargs, a);
    if (k < 0) {
        miss = 1;
        goto done;
    }
    s = &t->specs[k];
    if (s->any_layout) {
        for (Py_ssize_t i = 0; i < nargs; i++) {
            if (a[i].dense) continue;
            PyArray_Descr* d = PyArray_DescrFromType(npy_of(a[i].dtype));
            if (!d) goto done;
            PyObject* c = PyArray_FromAny(args[i], d, 0, 0, NPY_ARRAY_CARRAY_RO, NULL);
            if (!c) goto done;
            copies[i] = c;
            copied |= 1ULL << i;
            data[i] = PyArray_DATA((PyArrayObject*)c);
        }
    }
    for (n_outs = 0; n_outs < s->n_outputs; n_outs++) {
        const rlx_scm_tensor* o = &s->outputs[n_outs];
        const int32_t donor = s->alias_of ? s->alias_of[n_outs] : -1;
        if (donor >= 0 && donor < nargs && donatable(st, k, args, views, held, nargs, donor)) {
            Py_INCREF(args[donor]);  /* written in place and returned (donation.py) */
            outs[n_outs] = args[donor];
            out_ptrs[n_outs] = (void*)data[donor];
            continue;
        }
        PyObject* arr = PyArray_SimpleNew(o->ndim, (npy_intp*)o->dims, npy_of(o->dtype));
        if (!arr) goto done;
        outs[n_outs] = arr;
        out_ptrs[n_outs] = PyArray_DATA((PyArrayObject*)arr);
    }
    if (s->arena_bytes > 0 && st->arenas[k] == NULL) {
        size_t bytes = ((size_t)s->arena_bytes + 63) & ~(size_t)63;
        void* mem = NULL;
        if (posix_memalign(&mem, 64, bytes) != 0) { PyErr_NoMemory(); goto done; }
        memset(mem, 0, bytes);  /* the kernels' bound state starts zeroed (CProgram.bind_state) */
        st->arenas[k] = (unsigned char*)mem;
    }
    /* the GIL stays held across the kernel: it is what makes reusing the arena safe */
    s->run(data, st->param_ptrs + st->param_base[k], out_ptrs, st->arenas[k]);
    int64_t info[2] = {0, 0};
    int failed = s->error(info);
    if (failed) {  /* e.g. a gather index out of range: an error, never a result */
        PyObject* r = PyObject_CallFunction(st->on_error, "iiLL", (int)k, failed - 1,
                                            (long long)info[0], (long long)info[1]);
        Py_XDECREF(r);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "rlx kernel runtime error");
        goto done;
    }
    if (count) {
        st->hits[k]++;
        if (st->log_len < st->log_cap) st->log[st->log_len++] = k;
    }
    if (s->n_outputs == 1) {
        result = outs[0];
        n_outs = 0;  /* ownership moves to the caller */
    } else {
        result = PyTuple_New(s->n_outputs);
        if (result) {
            for (int32_t j = 0; j < s->n_outputs; j++) PyTuple_SET_ITEM(result, j, outs[j]);
            n_outs = 0;
        }
    }

done:
    for (int32_t j = 0; j < n_outs; j++) Py_DECREF(outs[j]);
    if (held | copied) {
        for (Py_ssize_t i = 0; i < nargs; i++) {
            if (held & (1ULL << i)) PyBuffer_Release(&views[i]);
            if (copied & (1ULL << i)) Py_DECREF(copies[i]);
        }
    }
    /* the only way back into the interpreter: compile a specialization, rebuild the module */
    if (miss) {
        if (!count) {  /* the retry after a rebuild must hit: anything else is our bug */
            PyErr_SetString(PyExc_RuntimeError, "rlx SCM: no specialization accepts the "
                            "arguments it was just built for");
            return NULL;
        }
        return PyObject_Vectorcall(st->on_miss, args, (size_t)nargs, NULL);
    }
    return result;
}

static PyObject* scm_call(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                          PyObject* kwnames) {
    /* keyword arguments: on_miss binds them to positions in Python (runtime/call_args.py) */
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        return PyObject_Vectorcall(((ScmState*)self)->on_miss, args, (size_t)nargs, kwnames);
    return dispatch((ScmState*)self, args, nargs, 1);
}

static PyObject* scm_call_uncounted(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    return dispatch((ScmState*)self, args, nargs, 0);
}

static PyMethodDef call_def = {"call", (PyCFunction)(void (*)(void))scm_call,
                               METH_FASTCALL | METH_KEYWORDS,
                               "run the first specialization whose guards pass, else on_miss"};
static PyMethodDef call_uncounted_def = {
    "call_uncounted", (PyCFunction)(void (*)(void))scm_call_uncounted, METH_FASTCALL,
    "as call, without counting a hit (the retry after a miss)"};

/* create(params, on_miss, arg_error, on_error, log_capacity) -> (call, call_uncounted, state) */
static PyObject* scm_create(PyObject* mod, PyObject* args) {
    PyObject *params, *on_miss, *arg_error, *on_error;
    Py_ssize_t log_cap;
    if (!PyArg_ParseTuple(args, "O!OOOn", &PyTuple_Type, &params, &on_miss, &arg_error,
                          &on_error, &log_cap))
        return NULL;
    if (!PyCallable_Check(on_miss) || !PyCallable_Check(arg_error) || !PyCallable_Check(on_error)) {
        PyErr_SetString(PyExc_TypeError, "on_miss, arg_error and on_error must be callable");
        return NULL;
    }
    const rlx_scm_table_t* t = &rlx_scm_module_table;
    if (t->abi != RLX_SCM_ABI) {
        PyErr_Format(PyExc_ImportError, "table ABI %d != runtime ABI %d", t->abi, RLX_SCM_ABI);
        return NULL;
    }
    if (PyTuple_GET_SIZE(params) != t->n_specs) {
        PyErr_Format(PyExc_ValueError, "params for %zd specializations, table has %d",
                     PyTuple_GET_SIZE(params), (int)t->n_specs);
        return NULL;
    }
    ScmState* st = PyObject_GC_New(ScmState, &ScmStateType);
    if (!st) return NULL;
    st->table = t;
    st->on_miss = NULL; st->arg_error = NULL; st->on_error = NULL; st->params = NULL;
    st->param_ptrs = NULL; st->param_base = NULL; st->arenas = NULL; st->hits = NULL;
    st->log = NULL; st->log_len = 0; st->log_cap = 0;
    Py_INCREF(on_miss); st->on_miss = on_miss;
    Py_INCREF(arg_error); st->arg_error = arg_error;
    Py_INCREF(on_error); st->on_error = on_error;
    Py_INCREF(params); st->params = params;
    Py_ssize_t total = 0;
    for (int32_t k = 0; k < t->n_specs; k++) {
        PyObject* p = PyTuple_GET_ITEM(params, k);
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != t->specs[k].n_params) {
            PyErr_Format(PyExc_ValueError, "specialization %d takes %d params", (int)k,
                         (int)t->specs[k].n_params);
            Py_DECREF(st);
            return NULL;
        }
        total += PyTuple_GET_SIZE(p);
    }
    st->param_ptrs = (const void**)calloc((size_t)(total ? total : 1), sizeof(void*));
    st->param_base = (Py_ssize_t*)calloc((size_t)t->n_specs, sizeof(Py_ssize_t));
    st->arenas = (unsigned char**)calloc((size_t)t->n_specs, sizeof(unsigned char*));
    st->hits = (unsigned long long*)calloc((size_t)t->n_specs, sizeof(unsigned long long));
    st->log = (int32_t*)calloc((size_t)(log_cap > 0 ? log_cap : 1), sizeof(int32_t));
    if (!st->param_ptrs || !st->param_base || !st->arenas || !st->hits || !st->log) {
        Py_DECREF(st);
        return PyErr_NoMemory();
    }
    st->log_cap = log_cap > 0 ? log_cap : 0;
    Py_ssize_t at = 0;
    for (int32_t k = 0; k < t->n_specs; k++) {
        PyObject* p = PyTuple_GET_ITEM(params, k);
        st->param_base[k] = at;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(p); j++) {
            PyObject* arr = PyTuple_GET_ITEM(p, j);
            if (!PyArray_Check(arr) || !PyArray_IS_C_CONTIGUOUS((PyArrayObject*)arr)
                || !PyArray_ISALIGNED((PyArrayObject*)arr)) {
                PyErr_Format(PyExc_ValueError,
                             "param %zd of specialization %d is not an aligned C-contiguous array",
                             j, (int)k);
                Py_DECREF(st);
                return NULL;
            }
            st->param_ptrs[at++] = PyArray_DATA((PyArrayObject*)arr);
        }
    }
    PyObject_GC_Track((PyObject*)st);
    PyObject* call = PyCFunction_NewEx(&call_def, (PyObject*)st, NULL);
    PyObject* quiet = PyCFunction_NewEx(&call_uncounted_def, (PyObject*)st, NULL);
    PyObject* out = (call && quiet) ? PyTuple_Pack(3, call, quiet, (PyObject*)st) : NULL;
    Py_XDECREF(call);
    Py_XDECREF(quiet);
    Py_DECREF(st);
    return out;
}

static PyObject* scm_table_info(PyObject* mod, PyObject* unused) {
    const rlx_scm_table_t* t = &rlx_scm_module_table;
    return Py_BuildValue("{s:i,s:i,s:i}", "abi", (int)t->abi, "n_specs", (int)t->n_specs,
                         "arity", (int)t->arity);
}

static PyMethodDef module_methods[] = {
    {"create", (PyCFunction)scm_create, METH_VARARGS,
     "create(params, on_miss, arg_error, on_error, log_capacity) -> (call, call_uncounted, state)"},
    {"table_info", (PyCFunction)scm_table_info, METH_NOARGS, "abi, n_specs, arity"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "@MODULE@",
    .m_doc = "rlx specialization cache module",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit_@MODULE@(void) {
    import_array();
    if (PyType_Ready(&ScmStateType) < 0) return NULL;
    return PyModule_Create(&module_def);
}
"""
