"""The converter table: ONNX op type -> converter, the op versions it implements exactly, and
the attributes it understands. An attribute not listed here makes the node a rejection, so a
new ONNX attribute can never be silently ignored.

``versions`` are ONNX ``since_version`` numbers (what ``onnx.defs.get_schema(op, opset)``
resolves to). A version is listed only where the op's semantics are those the converter
implements; bumps that only added element types are listed, since unsupported types are
rejected by dtype.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlx_core.frontend.onnx_import.ops import (
    attention,
    bits,
    causal_conv,
    control_flow,
    conv,
    deform_conv,
    det_lrn,
    einsum,
    flex_attention,
    geometry,
    grid_sample,
    inverse_trig,
    legacy,
    linear_attention,
    loss,
    nn,
    ort_quant,
    pooling,
    quant,
    recurrent,
    reduce,
    resize,
    roi_align,
    rotary,
    scatter,
    shape,
    signal,
    topk,
    training,
)
from rlx_core.frontend.onnx_import.ops import elementwise as ew


@dataclass(frozen=True)
class OnnxOp:
    """One row of the converter table: the converter ``fn``, the ONNX versions it implements
    exactly, the attributes it understands, and the converter of older versions whose semantics
    differ (``older``)."""

    fn: Callable[[Any], Any]
    versions: tuple[int, ...]
    attrs: tuple[str, ...] = ()
    older: OnnxOp | None = None  # the converter of older versions with other semantics

    def at(self, version: int) -> OnnxOp | None:
        """The converter implementing ``version`` of the op, or None."""
        if version in self.versions:
            return self
        return self.older.at(version) if self.older is not None else None

    @property
    def all_versions(self) -> tuple[int, ...]:
        older = self.older.all_versions if self.older is not None else ()
        return tuple(sorted(older + self.versions))


_REDUCE_ATTRS = ("keepdims", "noop_with_empty_axes", "axes")
_POOL_ATTRS = ("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides")
_RNN_ATTRS = ("activation_alpha", "activation_beta", "activations", "clip", "direction",
              "hidden_size", "layout")
_CONTROL_FLOW_VERSIONS = (1, 11, 13, 16, 19, 21, 23, 24, 25)  # later bumps only add types
_CAST_VERSIONS = (6, 9, 13, 19, 21, 23, 24, 25, 28)
_QUANT_VERSIONS = (10, 13, 19, 21, 23, 24, 25, 28)  # 21+: blocks, 23+: precision
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")

CONVERTERS: dict[str, OnnxOp] = {
    # ---- elementwise arithmetic ----------------------------------------------------------------
    "Add": OnnxOp(ew.binary("add"), (7, 13, 14)),
    "Sub": OnnxOp(ew.binary("sub"), (7, 13, 14)),
    "Mul": OnnxOp(ew.binary("mul"), (7, 13, 14)),
    "Div": OnnxOp(ew.div, (7, 13, 14)),
    "Pow": OnnxOp(ew.pow_, (7, 12, 13, 15)),
    "Mod": OnnxOp(ew.mod, (10, 13, 28), ("fmod",)),
    "Max": OnnxOp(ew.variadic("max"), (6, 8, 12, 13)),
    "Min": OnnxOp(ew.variadic("min"), (6, 8, 12, 13)),
    "Sum": OnnxOp(ew.variadic("add"), (6, 8, 13)),
    "Mean": OnnxOp(ew.mean, (6, 8, 13)),
    "Abs": OnnxOp(ew.abs_, (6, 13)),
    "Neg": OnnxOp(ew.neg, (6, 13)),
    "Sign": OnnxOp(ew.sign, (9, 13)),
    "Reciprocal": OnnxOp(ew.reciprocal, (6, 13)),
    "Exp": OnnxOp(ew.unary("exp"), (6, 13)),
    "Log": OnnxOp(ew.unary("log"), (6, 13)),
    "Sqrt": OnnxOp(ew.unary("sqrt"), (6, 13)),
    "Tanh": OnnxOp(ew.unary("tanh"), (6, 13)),
    "Sigmoid": OnnxOp(ew.unary("logistic"), (6, 13)),
    "Erf": OnnxOp(ew.unary("erf"), (9, 13)),
    "Sin": OnnxOp(ew.unary("sin"), (7, 22)),
    "Cos": OnnxOp(ew.unary("cos"), (7, 22)),
    "Tan": OnnxOp(ew.tan, (7, 22)),
    "Sinh": OnnxOp(ew.sinh, (9, 22)),
    "Cosh": OnnxOp(ew.cosh, (9, 22)),
    "Asinh": OnnxOp(ew.asinh, (9, 22)),
    "Acosh": OnnxOp(ew.acosh, (9, 22)),
    "Atanh": OnnxOp(ew.atanh, (9, 22)),
    "Atan": OnnxOp(inverse_trig.atan, (7, 22)),
    "Asin": OnnxOp(inverse_trig.asin, (7, 22)),
    "Acos": OnnxOp(inverse_trig.acos, (7, 22)),
    "Floor": OnnxOp(ew.unary("floor"), (6, 13)),
    "Ceil": OnnxOp(ew.unary("ceil"), (6, 13)),
    "Round": OnnxOp(ew.unary("round"), (11, 22)),  # half to even in both
    "IsNaN": OnnxOp(ew.is_nan, (9, 13, 20)),
    "IsInf": OnnxOp(ew.is_inf, (10, 20), ("detect_negative", "detect_positive")),
    "Clip": OnnxOp(ew.clip, (11, 12, 13), older=OnnxOp(legacy.clip_6, (6,), ("max", "min"))),
    "Where": OnnxOp(ew.where, (9, 16)),
    "BitShift": OnnxOp(bits.bit_shift, (11, 28), ("direction",)),
    "BitCast": OnnxOp(bits.bit_cast, (26,), ("to",)),
    # ---- comparison and logic ------------------------------------------------------------------
    "Equal": OnnxOp(ew.compare("eq"), (7, 11, 13, 19)),
    "Greater": OnnxOp(ew.compare("gt"), (7, 9, 13)),
    "Less": OnnxOp(ew.compare("lt"), (7, 9, 13)),
    "GreaterOrEqual": OnnxOp(ew.compare("ge"), (12, 16)),
    "LessOrEqual": OnnxOp(ew.compare("le"), (12, 16)),
    "And": OnnxOp(ew.logical("and"), (7,)),
    "Or": OnnxOp(ew.logical("or"), (7,)),
    "Xor": OnnxOp(ew.logical("xor"), (7,)),
    "Not": OnnxOp(ew.not_, (1,)),
    "BitwiseAnd": OnnxOp(ew.bitwise("and"), (18,)),
    "BitwiseOr": OnnxOp(ew.bitwise("or"), (18,)),
    "BitwiseXor": OnnxOp(ew.bitwise("xor"), (18,)),
    "BitwiseNot": OnnxOp(ew.bitwise_not, (18,)),
    # ---- casts -----------------------------------------------------------------------------------
    # ---- quantization --------------------------------------------------------------------------
    "QuantizeLinear": OnnxOp(quant.quantize_linear, _QUANT_VERSIONS,
                             ("axis", "block_size", "output_dtype", "precision", "saturate")),
    "DequantizeLinear": OnnxOp(quant.dequantize_linear, _QUANT_VERSIONS,
                               ("axis", "block_size", "output_dtype")),
    "DynamicQuantizeLinear": OnnxOp(quant.dynamic_quantize_linear, (11,)),
    "MatMulInteger": OnnxOp(quant.matmul_integer, (10,)),
    "QLinearMatMul": OnnxOp(quant.qlinear_matmul, (10, 21)),
    "ConvInteger": OnnxOp(quant.conv_integer, (10,), _CONV_ATTRS),
    "QLinearConv": OnnxOp(quant.qlinear_conv, (10,), _CONV_ATTRS),
    "Cast": OnnxOp(ew.cast, _CAST_VERSIONS, ("to", "saturate", "round_mode")),
    "CastLike": OnnxOp(ew.cast_like, (15, 19, 21, 23, 24, 25), ("saturate", "round_mode")),
    "Identity": OnnxOp(ew.identity, (1, 13, 14, 16, 19, 21, 23, 24, 25)),
    # ---- activations ---------------------------------------------------------------------------
    "Relu": OnnxOp(ew.relu, (6, 13, 14)),
    "LeakyRelu": OnnxOp(ew.leaky_relu, (6, 16), ("alpha",)),
    "PRelu": OnnxOp(ew.prelu, (7, 9, 16)),
    "Elu": OnnxOp(ew.elu, (6, 22), ("alpha",)),
    "Celu": OnnxOp(ew.celu, (12, 28), ("alpha",)),
    "Selu": OnnxOp(ew.selu, (6, 22), ("alpha", "gamma")),
    "HardSigmoid": OnnxOp(ew.hard_sigmoid, (6, 22), ("alpha", "beta")),
    "HardSwish": OnnxOp(ew.hard_swish, (14, 22)),
    "Softplus": OnnxOp(ew.softplus, (1, 22)),
    "Softsign": OnnxOp(ew.softsign, (1, 22)),
    "ThresholdedRelu": OnnxOp(ew.thresholded_relu, (10, 22), ("alpha",)),
    "Mish": OnnxOp(ew.mish, (18, 22)),
    "Swish": OnnxOp(ew.swish, (24,), ("alpha",)),
    "Gelu": OnnxOp(ew.gelu, (20,), ("approximate",)),
    "Shrink": OnnxOp(ew.shrink, (9,), ("bias", "lambd")),
    # ---- reductions ----------------------------------------------------------------------------
    "ReduceSum": OnnxOp(reduce.reduction("sum"), (1, 11, 13,), _REDUCE_ATTRS),
    "ReduceMean": OnnxOp(reduce.reduction("mean"), (1, 11, 13, 18), _REDUCE_ATTRS),
    "ReduceMax": OnnxOp(reduce.reduction("max"), (1, 11, 12, 13, 18, 20), _REDUCE_ATTRS),
    "ReduceMin": OnnxOp(reduce.reduction("min"), (1, 11, 12, 13, 18, 20), _REDUCE_ATTRS),
    "ReduceProd": OnnxOp(reduce.reduction("prod"), (1, 11, 13, 18), _REDUCE_ATTRS),
    "ReduceL1": OnnxOp(reduce.reduction("l1"), (1, 11, 13, 18), _REDUCE_ATTRS),
    "ReduceL2": OnnxOp(reduce.reduction("l2"), (1, 11, 13, 18), _REDUCE_ATTRS),
    "ReduceSumSquare": OnnxOp(reduce.reduction("sum_square"), (1, 11, 13, 18), _REDUCE_ATTRS),
    "ReduceLogSum": OnnxOp(reduce.reduction("log_sum"), (1, 11, 13, 18, 28), _REDUCE_ATTRS),
    "ReduceLogSumExp": OnnxOp(reduce.reduction("log_sum_exp"), (1, 11, 13, 18, 28),
                              _REDUCE_ATTRS),
    "ArgMax": OnnxOp(reduce.arg("max"), (1, 11, 12, 13), ("axis", "keepdims", "select_last_index")),
    "ArgMin": OnnxOp(reduce.arg("min"), (1, 11, 12, 13), ("axis", "keepdims", "select_last_index")),
    "CumSum": OnnxOp(reduce.cumulative("add", 0), (11, 14), ("exclusive", "reverse")),
    "CumProd": OnnxOp(reduce.cumulative("mul", 1), (26,), ("exclusive", "reverse")),
    # ---- shape and data movement -----------------------------------------------------------------
    "Reshape": OnnxOp(shape.reshape, (5, 13, 14, 19, 21, 23, 24, 25), ("allowzero",)),
    "Flatten": OnnxOp(shape.flatten, (1, 9, 11, 13, 21, 23, 24, 25), ("axis",)),
    "Squeeze": OnnxOp(shape.squeeze, (1, 11, 13, 21, 23, 24, 25), ("axes",)),
    "Unsqueeze": OnnxOp(shape.unsqueeze, (1, 11, 13, 21, 23, 24, 25), ("axes",)),
    "Transpose": OnnxOp(shape.transpose, (1, 13, 21, 23, 24, 25), ("perm",)),
    "Concat": OnnxOp(shape.concat, (4, 11, 13), ("axis",)),
    "Split": OnnxOp(shape.split, (13, 18), ("axis", "num_outputs"),
                    older=OnnxOp(shape.split, (2, 11), ("axis", "split"))),
    "Slice": OnnxOp(shape.slice_, (10, 11, 13),
                    older=OnnxOp(legacy.slice_1, (1,), ("axes", "ends", "starts"))),  # 10: inputs, 11: negative axes
    "Gather": OnnxOp(shape.gather, (1, 11, 13), ("axis",)),
    "GatherElements": OnnxOp(shape.gather_elements, (11, 13), ("axis",)),
    "GatherND": OnnxOp(shape.gather_nd, (11, 12, 13), ("batch_dims",)),
    "ScatterElements": OnnxOp(scatter.scatter_elements, (11, 13, 16, 18), ("axis", "reduction")),
    "ScatterND": OnnxOp(scatter.scatter_nd, (11, 13, 16, 18), ("reduction",)),
    "Scatter": OnnxOp(scatter.scatter, (9, 11), ("axis",)),
    "TensorScatter": OnnxOp(scatter.tensor_scatter, (24,), ("axis", "mode")),
    "Expand": OnnxOp(shape.expand, (8, 13)),
    "Tile": OnnxOp(shape.tile, (6, 13)),
    "Shape": OnnxOp(shape.shape, (1, 13, 15, 19, 21, 23, 24, 25), ("start", "end")),
    "Size": OnnxOp(shape.size, (1, 13, 19, 21, 23, 24, 25)),
    "ConstantOfShape": OnnxOp(shape.constant_of_shape, (9, 20, 21, 23, 24, 25), ("value",)),
    "Constant": OnnxOp(shape.constant, (1, 9, 11, 12, 13, 19, 21, 23, 24, 25),
                       ("value", "value_float", "value_floats", "value_int", "value_ints",
                        "value_string", "value_strings", "sparse_value")),
    "Range": OnnxOp(shape.range_, (11, 27), ("stash_type",)),
    "OneHot": OnnxOp(shape.one_hot, (9, 11, 28), ("axis",)),
    "Pad": OnnxOp(shape.pad, (11, 13, 18, 19, 21, 23, 24, 25), ("mode",),
                  older=OnnxOp(legacy.pad_2, (2,), ("mode", "pads", "value"))),
    "Trilu": OnnxOp(shape.trilu, (14,), ("upper",)),
    "EyeLike": OnnxOp(shape.eye_like, (9, 22), ("dtype", "k")),
    "Compress": OnnxOp(shape.compress, (9, 11, 28), ("axis",)),
    "DepthToSpace": OnnxOp(shape.depth_to_space, (1, 11, 13, 28), ("blocksize", "mode")),
    "Resize": OnnxOp(resize.resize, (11, 13, 18, 19),
                     ("antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a",
                      "exclude_outside", "extrapolation_value", "keep_aspect_ratio_policy",
                      "mode", "nearest_mode"),
                     older=OnnxOp(legacy.resize_10, (10,), ("mode",))),
    "SpaceToDepth": OnnxOp(shape.space_to_depth, (1, 13, 28), ("blocksize", "mode")),
    # ---- neural-network blocks -----------------------------------------------------------------
    "MatMul": OnnxOp(nn.matmul, (1, 9, 13)),
    "Gemm": OnnxOp(nn.gemm, (7, 9, 11, 13), ("alpha", "beta", "transA", "transB")),
    "Softmax": OnnxOp(nn.softmax("softmax"), (13,), ("axis",),
                       older=OnnxOp(legacy.coerced_softmax("softmax"), (1, 11), ("axis",))),
    "LogSoftmax": OnnxOp(nn.softmax("log_softmax"), (13,), ("axis",),
                          older=OnnxOp(legacy.coerced_softmax("log_softmax"), (1, 11), ("axis",))),
    "Hardmax": OnnxOp(nn.hardmax, (13,), ("axis",),
                      older=OnnxOp(legacy.coerced_softmax("hardmax"), (1, 11), ("axis",))),
    "BatchNormalization": OnnxOp(training.batch_norm, (14, 15),
                                 ("epsilon", "momentum", "training_mode"),
                                 older=OnnxOp(legacy.batch_norm_7, (7, 9),
                                              ("epsilon", "momentum", "spatial"))),
    "InstanceNormalization": OnnxOp(nn.instance_norm, (6, 22), ("epsilon",)),
    "LayerNormalization": OnnxOp(nn.layer_norm, (17,), ("axis", "epsilon", "stash_type")),
    "RMSNormalization": OnnxOp(nn.rms_norm, (23,), ("axis", "epsilon", "stash_type")),
    "GroupNormalization": OnnxOp(nn.group_norm, (18, 21),
                                 ("epsilon", "num_groups", "stash_type")),
    "LpNormalization": OnnxOp(nn.lp_norm, (1, 22), ("axis", "p")),
    "MeanVarianceNormalization": OnnxOp(nn.mvn, (9, 13), ("axes",)),
    "Dropout": OnnxOp(training.dropout, (10, 12, 13, 22), ("seed", "ratio"),
                      older=OnnxOp(legacy.dropout_7, (7,), ("ratio",))),
    "Conv": OnnxOp(conv.conv, (1, 11, 22), ("auto_pad", "dilations", "group", "kernel_shape",
                                         "pads", "strides")),
    "ConvTranspose": OnnxOp(conv.conv_transpose, (11, 22),
                            ("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                             "output_shape", "pads", "strides")),
    "MaxPool": OnnxOp(pooling.max_pool, (1, 8, 10, 11, 12, 22), _POOL_ATTRS + ("storage_order",)),
    "MaxUnpool": OnnxOp(pooling.max_unpool, (11, 22), ("kernel_shape", "pads", "strides")),
    "DeformConv": OnnxOp(deform_conv.deform_conv, (19, 22),
                         ("dilations", "group", "kernel_shape", "offset_group", "pads",
                          "strides")),
    "RoiAlign": OnnxOp(roi_align.roi_align, (16, 22),
                       ("coordinate_transformation_mode", "mode", "output_height",
                        "output_width", "sampling_ratio", "spatial_scale"),
                       older=OnnxOp(legacy.roi_align_10, (10,),
                                    ("mode", "output_height", "output_width",
                                     "sampling_ratio", "spatial_scale"))),
    "Upsample": OnnxOp(pooling.upsample, (7, 9, 10), ("mode", "scales")),
    "AveragePool": OnnxOp(conv.avg_pool, (7, 10, 11, 19, 22), _POOL_ATTRS + ("count_include_pad",)),
    "LpPool": OnnxOp(conv.lp_pool, (2, 11, 18, 22), _POOL_ATTRS + ("p",)),
    "GlobalAveragePool": OnnxOp(conv.global_pool("avg"), (1, 22)),
    "GlobalMaxPool": OnnxOp(conv.global_pool("max"), (1, 22)),
    "Attention": OnnxOp(attention.attention, (23, 24, 25),
                        ("is_causal", "kv_num_heads", "left_window_size", "q_num_heads",
                         "qk_matmul_output_mode", "right_window_size", "scale", "softcap",
                         "softmax_precision")),
    "LinearAttention": OnnxOp(linear_attention.linear_attention, (27,),
                              ("chunk_size", "kv_num_heads", "q_num_heads", "scale",
                               "update_rule")),
    "CausalConvWithState": OnnxOp(causal_conv.causal_conv_with_state, (27,), ("activation",)),
    "RNN": OnnxOp(recurrent.recurrent("RNN"), (7, 14, 22), _RNN_ATTRS),
    "GRU": OnnxOp(recurrent.recurrent("GRU"), (7, 14, 22),
                  _RNN_ATTRS + ("linear_before_reset",)),
    "LSTM": OnnxOp(recurrent.recurrent("LSTM"), (7, 14, 22), _RNN_ATTRS + ("input_forget",)),
    "ReverseSequence": OnnxOp(recurrent.reverse_sequence, (10, 28), ("batch_axis", "time_axis")),
    # ---- control flow (unrolled / constant-folded into the static graph) -----------------------
    "If": OnnxOp(control_flow.if_, _CONTROL_FLOW_VERSIONS, ("else_branch", "then_branch")),
    "Loop": OnnxOp(control_flow.loop, _CONTROL_FLOW_VERSIONS, ("body",)),
    "Scan": OnnxOp(control_flow.scan, (8, 9, 11, 16, 19, 21, 23, 24, 25),
                   ("body", "directions", "num_scan_inputs", "scan_input_axes",
                    "scan_input_directions", "scan_output_axes", "scan_output_directions")),
    "Einsum": OnnxOp(einsum.einsum, (12, 28), ("equation",)),
    "RotaryEmbedding": OnnxOp(rotary.rotary_embedding, (23,),
                              ("interleaved", "num_heads", "rotary_embedding_dim")),
    "SwiGLU": OnnxOp(rotary.swiglu, (28,), ("alpha",)),
    "DFT": OnnxOp(signal.dft, (17, 20), ("axis", "inverse", "onesided")),
    "STFT": OnnxOp(signal.stft, (17,), ("onesided",)),
    "HannWindow": OnnxOp(signal.window("hann"), (17,), ("output_datatype", "periodic")),
    "HammingWindow": OnnxOp(signal.window("hamming"), (17,), ("output_datatype", "periodic")),
    "BlackmanWindow": OnnxOp(signal.window("blackman"), (17,), ("output_datatype", "periodic")),
    "MelWeightMatrix": OnnxOp(signal.mel_weight_matrix, (17,), ("output_datatype",)),
    "CenterCropPad": OnnxOp(geometry.center_crop_pad, (18,), ("axes",)),
    "AffineGrid": OnnxOp(geometry.affine_grid, (20,), ("align_corners",)),
    "Col2Im": OnnxOp(geometry.col2im, (18,), ("dilations", "pads", "strides")),
    "TopK": OnnxOp(topk.topk, (10, 11, 24), ("axis", "largest", "sorted"),
                   older=OnnxOp(legacy.topk_1, (1,), ("axis", "k"))),
    "Det": OnnxOp(det_lrn.det, (11, 22)),
    "LRN": OnnxOp(det_lrn.lrn, (1, 13), ("alpha", "beta", "bias", "size")),
    "GridSample": OnnxOp(grid_sample.grid_sample, (16, 20, 22),
                         ("align_corners", "mode", "padding_mode")),
    # ---- losses ----------------------------------------------------------------------------------
    "NegativeLogLikelihoodLoss": OnnxOp(loss.nll, (12, 13, 22), ("ignore_index", "reduction")),
    "SoftmaxCrossEntropyLoss": OnnxOp(loss.softmax_cross_entropy, (12, 13),
                                      ("ignore_index", "reduction")),
}

# ai.onnx.preview ops, by the domain's since_version
PREVIEW_CONVERTERS: dict[str, OnnxOp] = {
    "FlexAttention": OnnxOp(flex_attention.flex_attention, (1,),
                            ("prob_mod", "scale", "score_mod", "softmax_precision")),
}

# ai.onnx.preview.training ops (the optimizers), by the domain's since_version
TRAINING_CONVERTERS: dict[str, OnnxOp] = {
    "Momentum": OnnxOp(training.momentum, (1,), ("alpha", "beta", "mode", "norm_coefficient")),
    "Adam": OnnxOp(training.adam, (1,), ("alpha", "beta", "epsilon", "norm_coefficient",
                                         "norm_coefficient_post")),
    "Adagrad": OnnxOp(training.adagrad, (1,), ("decay_factor", "epsilon", "norm_coefficient")),
}

# ONNX Runtime's quantized contrib ops (com.microsoft, version 1), as its QOperator
# quantization writes them
ORT_QUANT_CONVERTERS: dict[str, OnnxOp] = {
    "QLinearAdd": OnnxOp(ort_quant.binary("add"), (1,)),
    "QLinearMul": OnnxOp(ort_quant.binary("mul"), (1,)),
    "QLinearSigmoid": OnnxOp(ort_quant.unary("sigmoid"), (1,)),
    "QLinearLeakyRelu": OnnxOp(ort_quant.unary("leaky_relu"), (1,), ("alpha",)),
    "QLinearGlobalAveragePool": OnnxOp(ort_quant.global_average_pool, (1,),
                                       ("channels_last",)),
    "QLinearConcat": OnnxOp(ort_quant.concat, (1,), ("axis",)),
    "QGemm": OnnxOp(ort_quant.qgemm, (1,), ("alpha", "transA", "transB")),
}

# the tables of the non-default domains the importer reads
DOMAIN_CONVERTERS: dict[str, dict[str, OnnxOp]] = {
    "ai.onnx.preview": PREVIEW_CONVERTERS,
    "ai.onnx.preview.training": TRAINING_CONVERTERS,
    ort_quant.DOMAIN: ORT_QUANT_CONVERTERS,
}
