"""Float64 NumPy references written from docs/specification.md, one module per operator family, shared by the
NumPy API, C ABI, property (hypothesis) and tilegrad.torch tests:

    silu.py                       SiLU backward (section 1) and its tolerance check
    bce.py                        binary cross entropy with logits backward (section 2)
    cross_entropy.py              cross entropy forward and gradient (section 3)
    embedding.py                  embedding dense backward (section 4)
    fused_linear_cross_entropy.py the vocabulary-parallel ops and the single-process op (section 5)
    rms_norm.py                   RMSNorm forward and gradient (section 6); add_rms_norm.py the fused
                                  residual add before it
    swi_glu.py                    SwiGLU forward and gradient (section 7)
    rotary_position_embedding.py  rotary position embedding forward and gradient
    adamw.py                      the AdamW step
    linear.py                     the linear layer and its gradients (section 11)
    gelu.py                       GELU and GeGLU forward and backward (sections 12 and 13)
    flash_attention.py            attention forward and gradient
    rounding.py                   the rounding contract of the float kernels (float32 arithmetic, each
                                  output rounded once) as one check, and the dtypes
    torch_compare.py              comparison helpers of the tilegrad.torch tests (imports torch)

Each reference computes from the formula, never from tilegrad's code; a tolerance that belongs to a
formula (its error bound) lives beside it.
"""
